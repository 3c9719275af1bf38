"""The project's own escape attempts (tests/escapes/), judged from inside and from the host.

Each attempt runs through the real CLI (`agentvisor exec`) like the shared escape harness:
a line starting with ESCAPED, a missing 'probe-ran' line, or evidence on the host fails.
"""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from tests.conftest import requires_bwrap, run_cli

pytestmark = requires_bwrap
ATTEMPTS = sorted((Path(__file__).parent / "escapes").glob("*.py"))


@pytest.fixture
def host(tmp_path):
    """Things on the host the sandbox must not reach."""
    outside = tmp_path / "outside.txt"
    outside.write_text("HOST-ONLY\n")
    hits: list[str] = []
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    port = tcp.getsockname()[1]
    tcp6 = socket.socket(socket.AF_INET6)
    tcp6.bind(("::1", port))
    tcp6.listen()
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", port))

    def accept(sock: socket.socket, label: str) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return
            hits.append(label)
            conn.close()

    def receive() -> None:
        while True:
            try:
                udp.recvfrom(10)
            except OSError:
                return
            hits.append("udp")

    for sock, label in ((tcp, "tcp"), (tcp6, "tcp6")):
        threading.Thread(target=accept, args=(sock, label), daemon=True).start()
    threading.Thread(target=receive, daemon=True).start()
    yield {"outside": outside, "port": port, "hits": hits}
    for sock in (tcp, tcp6, udp):
        sock.close()


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=lambda p: p.name)
def test_attempt_does_not_escape(attempt, host, tmp_path):
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n\tbare = false\n")
    (ws / attempt.name).write_text(attempt.read_text())
    args = {"net_udp_ipv6.py": [str(host["port"])]}.get(attempt.name, [str(host["outside"])])
    r = run_cli(
        "exec",
        "--workspace",
        str(ws),
        "--timeout",
        "20",
        "--",
        "python3",
        f"./{attempt.name}",
        *args,
        cwd=ws,
    )
    out = r.stdout + r.stderr
    assert "probe-ran" in out, f"the attempt did not run to its end: {out}"
    assert "ESCAPED" not in out, out
    assert host["hits"] == [], f"the host saw {host['hits']}"
    assert host["outside"].read_text() == "HOST-ONLY\n"
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    config = (ws / ".git" / "config").read_text()
    assert "fsmonitor" not in config and "hooksPath" not in config
    assert not (ws / ".envrc").exists()
    linked = ws / "linked"
    assert not linked.exists() or linked.stat().st_ino != host["outside"].stat().st_ino


@pytest.mark.parametrize("name", ["hardlink_out.py", "net_udp_ipv6.py", "proc_root.py"])
def test_attempt_escapes_without_the_sandbox(name, host, tmp_path):
    """Control: the same probes do get out with the unisolated local backend."""
    ws = tmp_path / "ws"
    ws.mkdir()
    attempt = Path(__file__).parent / "escapes" / name
    (ws / name).write_text(attempt.read_text())
    args = [str(host["port"])] if name == "net_udp_ipv6.py" else [str(host["outside"])]
    r = run_cli(
        "exec",
        "--backend",
        "local",
        "--workspace",
        str(ws),
        "--",
        "python3",
        f"./{name}",
        *args,
        cwd=ws,
    )
    assert "ESCAPED" in r.stdout, r.stdout + r.stderr
