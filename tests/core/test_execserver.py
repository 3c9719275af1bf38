"""`agentvisor exec` through a running gateway (the exec server), and its fallback."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from agentvisor import execproto, paths
from tests.conftest import AGENTVISOR, requires_bwrap
from tests.gateway.conftest import free_port

pytestmark = requires_bwrap


@pytest.mark.parametrize("env", [
    {"HOME": "/home/u"},
    {"HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000"},
    {"HOME": "/home/u", "XDG_STATE_HOME": "/srv/state"},
    {"HOME": "/home/u", "XDG_RUNTIME_DIR": "relative/ignored"},
])
def test_client_and_server_agree_on_the_socket(env, monkeypatch):
    for key in ("XDG_RUNTIME_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert execproto.socket_path(env) == str(paths.runtime_dir() / "exec.sock")


def test_request_round_trip():
    env = {"A": "1", "B": "x=y", "C": ""}
    args = ["exec", "--", "sh", "-c", "echo 'a b'\n", ""]
    assert execproto.decode_request(execproto.encode_request(args, "/w", env)) == \
        (args, "/w", env)
    with pytest.raises(ValueError):
        execproto.decode_request(b"something else\0")


@pytest.fixture
def gateway(tmp_path, isolated_home):
    env = dict(os.environ, HOME=str(isolated_home), XDG_RUNTIME_DIR=str(tmp_path / "run"))
    env.pop("AGENTVISOR_NO_GATEWAY")
    config = isolated_home / ".config" / "agentvisor" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("approvals: {timeout: 2}\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = subprocess.Popen([AGENTVISOR, "serve", "--port", str(free_port()), "--workspace",
                             str(ws)], env=env, stderr=subprocess.PIPE, text=True)
    sock = tmp_path / "run" / "agentvisor" / "exec.sock"
    deadline = time.monotonic() + 30
    while not sock.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert sock.exists(), proc.stderr.read() if proc.poll() is not None else "no socket"
    yield {"env": env, "ws": ws, "proc": proc, "sock": sock}
    proc.terminate()
    proc.wait(10)


def cli(gateway, *args, **kw):
    return subprocess.run([AGENTVISOR, "exec", *args], env=gateway["env"], cwd=gateway["ws"],
                          capture_output=True, text=True, timeout=60, **kw)


def test_exec_runs_through_the_gateway(gateway):
    r = cli(gateway, "--", "sh", "-c", "echo out; echo err >&2; pwd; exit 7")
    assert (r.returncode, r.stdout, r.stderr) == (7, f"out\n{gateway['ws']}\n", "err\n")
    r = cli(gateway, "--", "tr", "a-z", "A-Z", input="hello\n")
    assert r.stdout == "HELLO\n"
    r = cli(gateway, "--timeout", "1", "--", "sleep", "30")
    assert r.returncode == 124 and "timed out" in r.stderr
    r = cli(gateway, "--", "sh", "-c", "sudo true")  # asks; nobody answers in 2 s
    assert r.returncode == 125 and "refused" in r.stderr


def test_the_run_really_happens_in_the_gateway(gateway):
    """Ending the gateway ends a run it is serving: proof the CLI handed it over."""
    proc = subprocess.Popen([AGENTVISOR, "exec", "--", "sleep", "30"], env=gateway["env"],
                            cwd=gateway["ws"], stderr=subprocess.PIPE, text=True)
    time.sleep(1.5)
    gateway["proc"].kill()
    gateway["proc"].wait()
    assert proc.wait(15) == 125
    assert "gateway ended the run" in proc.stderr.read()


def test_ctrl_c_ends_the_run(gateway):
    marker = "agentvisor-ctrlc-" + os.urandom(4).hex()
    proc = subprocess.Popen([AGENTVISOR, "exec", "--", "sh", "-c", f"sleep 30; : {marker}"],
                            env=gateway["env"], cwd=gateway["ws"])
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(15) != 0
    time.sleep(0.3)
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).stdout == b""


def test_without_a_gateway_exec_runs_itself(tmp_path, isolated_home):
    env = dict(os.environ, HOME=str(isolated_home), XDG_RUNTIME_DIR=str(tmp_path / "none"))
    env.pop("AGENTVISOR_NO_GATEWAY")
    r = subprocess.run([AGENTVISOR, "exec", "--", "echo", "alone"], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert (r.returncode, r.stdout) == (0, "alone\n")
