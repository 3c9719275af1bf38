"""Escape attempts through ``agentvisor exec --backend docker``: the shared harness and ours.

The policy layer would refuse some probes before they reach the sandbox (reading a key
in ~/.ssh, inline code). That proves nothing about the container, so these runs use a
config that switches those policy categories off: what is tested here is the sandbox.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..conftest import REPO, SHARED, run_cli
from .helpers import CLI_ENV

HARNESS = SHARED / "tools" / "escape-harness"
CORPUS = SHARED / "corpus" / "escapes"
OWN = sorted((REPO / "tests" / "escapes").glob("*.py"))
POLICY_OFF = "policy:\n  categories:\n    credentials: false\n    dynamic_code: false\n"


@pytest.fixture
def relaxed(tmp_path: Path, image: str) -> Path:
    path = tmp_path / "sandbox-under-test.yaml"
    path.write_text(POLICY_OFF)
    return path


@pytest.mark.slow
def test_shared_escape_harness_reports_nothing_escaped(relaxed: Path) -> None:
    if not HARNESS.is_file() or not CORPUS.is_dir():
        pytest.skip(f"the shared escape harness is not beside this checkout ({HARNESS})")
    agentvisor = Path(sys.executable).with_name("agentvisor")
    result = subprocess.run(
        [
            sys.executable,
            str(HARNESS),
            "--agentvisor",
            str(agentvisor),
            "--exec-args",
            f"--backend docker --config {relaxed}",
            str(CORPUS),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=CLI_ENV,
    )
    lines = result.stdout.strip().splitlines()
    assert lines and lines[-1].endswith(" 0 failed"), result.stdout + result.stderr
    assert result.returncode == 0


@pytest.fixture
def listeners() -> Iterator[tuple[int, list[str]]]:
    """TCP and UDP on the host's IPv4 and IPv6 loopback, recording what reaches them."""
    hits: list[str] = []
    tcp = socket.create_server(("127.0.0.1", 0))
    port = tcp.getsockname()[1]
    socks = [tcp, socket.create_server(("::1", port), family=socket.AF_INET6)]
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        udp = socket.socket(family, socket.SOCK_DGRAM)
        udp.bind((host, port))
        udp.settimeout(0)
        socks.append(udp)
    for sock in socks[:2]:
        threading.Thread(target=lambda s=sock: _accept(s, hits), daemon=True).start()
    yield port, hits
    for sock in socks[2:]:
        with contextlib.suppress(OSError):
            sock.recvfrom(10)
            hits.append("udp")
    for sock in socks:
        sock.close()


def _accept(sock: socket.socket, hits: list[str]) -> None:
    with contextlib.suppress(OSError):
        while True:
            conn, _ = sock.accept()
            hits.append("tcp")
            conn.close()


@pytest.mark.parametrize("attempt", OWN, ids=lambda p: p.name)
def test_own_escape_attempts_stay_inside(
    attempt: Path, relaxed: Path, tmp_path: Path, listeners: tuple[int, list[str]]
) -> None:
    port, hits = listeners
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (ws / attempt.name).write_text(attempt.read_text())
    outside = tmp_path / "outside.txt"
    outside.write_text("HOST-ONLY\n")
    arg = str(port) if attempt.name == "net_udp_ipv6.py" else str(outside)
    r = run_cli(
        "exec",
        "--backend",
        "docker",
        "--config",
        str(relaxed),
        "--workspace",
        str(ws),
        "--timeout",
        "20",
        "--",
        "python3",
        f"./{attempt.name}",
        arg,
        cwd=ws,
        env=CLI_ENV,
    )
    out = r.stdout + r.stderr
    assert "probe-ran" in out, out
    assert "ESCAPED" not in out, out
    assert outside.read_text() == "HOST-ONLY\n"
    assert hits == [], hits
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert "fsmonitor" not in (ws / ".git" / "config").read_text()
