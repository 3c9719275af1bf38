"""`agentvisor exec` through a running gateway (the exec server), and its fallback."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentvisor import paths
from agentvisor.exec import proto
from agentvisor.exec.request import ExecRequest
from tests.conftest import AGENTVISOR, requires_bwrap
from tests.gateway.conftest import free_port

pytestmark = requires_bwrap


@pytest.mark.parametrize(
    "env",
    [
        {"HOME": "/home/u"},
        {"HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000"},
        {"HOME": "/home/u", "XDG_STATE_HOME": "/srv/state"},
        {"HOME": "/home/u", "XDG_RUNTIME_DIR": "relative/ignored"},
    ],
)
def test_client_and_server_agree_on_the_socket(env, monkeypatch):
    for key in ("XDG_RUNTIME_DIR", "XDG_STATE_HOME"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert proto.socket_path(env) == str(paths.runtime_dir() / "exec.sock")


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"config": "", "workspace": "w=x", "timeout": 2.5, "network": "proxy", "dry_run": True},
        {"raw_output": True, "network": "none", "backend": "bwrap"},
        {"config": "/c.yaml", "workspace": "", "timeout": 1e-3, "backend": "local"},
    ],
)
def test_request_round_trip(options):
    env = {"A": "1", "B": "x=y", "C": ""}
    argv = ("sh", "-c", "echo 'a b'\n", "", "--timeout", "=3")
    request = ExecRequest(argv=argv, cwd="/w", environ=env, **options)
    assert proto.decode_request(proto.encode_request(request)) == request


@pytest.mark.parametrize(
    "data",
    [
        b"something else\0",
        b"agentvisor-exec-1\0/w\0" + b"1\0true",  # another version's client
        b"agentvisor-exec-2\0/w\0\0\0\0=web\0\0" + b"0\0" + b"0\0" + b"1\0true",  # bad network
        b"agentvisor-exec-2\0/w\0\0\0\0\0\0" + b"0\0" + b"0\0" + b"3\0true",  # argv cut short
        b"agentvisor-exec-2\0/w\0x\0\0\0\0\0" + b"0\0" + b"0\0" + b"1\0true",  # option sans "="
        b"agentvisor-exec-2\0/w\0\0\0\0\0\0" + b"0\0" + b"2\0" + b"1\0true",  # bad flag
        b"agentvisor-exec-2\0/w\0\0\0\0\0\0" + b"0\0" + b"0",  # no count
    ],
)
def test_anything_else_is_refused(data):
    with pytest.raises(ValueError):
        proto.decode_request(data)
    control = b"agentvisor-exec-2\0/w\0\0\0\0\0\0" + b"0\0" + b"0\0" + b"1\0true"
    assert proto.decode_request(control) == ExecRequest(argv=("true",), cwd="/w")


@pytest.fixture
def gateway(tmp_path, isolated_home):
    env = dict(os.environ, HOME=str(isolated_home), XDG_RUNTIME_DIR=str(tmp_path / "run"))
    env.pop("AGENTVISOR_NO_GATEWAY")
    config = isolated_home / ".config" / "agentvisor" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text("approvals: {timeout: 2}\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    proc = subprocess.Popen(
        [AGENTVISOR, "serve", "--port", str(free_port()), "--workspace", str(ws)],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    sock = tmp_path / "run" / "agentvisor" / "exec.sock"
    deadline = time.monotonic() + 30
    while not sock.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert sock.exists(), proc.stderr.read() if proc.poll() is not None else "no socket"
    yield {"env": env, "ws": ws, "proc": proc, "sock": sock}
    proc.terminate()
    proc.wait(10)


def cli(gateway, *args, **kw):
    return subprocess.run(
        [AGENTVISOR, "exec", *args],
        env=gateway["env"],
        cwd=gateway["ws"],
        capture_output=True,
        text=True,
        timeout=60,
        **kw,
    )


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
    proc = subprocess.Popen(
        [AGENTVISOR, "exec", "--", "sleep", "30"],
        env=gateway["env"],
        cwd=gateway["ws"],
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.5)
    gateway["proc"].kill()
    gateway["proc"].wait()
    assert proc.wait(15) == 125
    assert "gateway ended the run" in proc.stderr.read()


def test_ctrl_c_ends_the_run(gateway):
    marker = "agentvisor-ctrlc-" + os.urandom(4).hex()
    proc = subprocess.Popen(
        [AGENTVISOR, "exec", "--", "sh", "-c", f"sleep 30; : {marker}"],
        env=gateway["env"],
        cwd=gateway["ws"],
    )
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(15) != 0
    time.sleep(0.3)
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).stdout == b""


def test_without_a_gateway_exec_runs_itself(tmp_path, isolated_home):
    env = dict(os.environ, HOME=str(isolated_home), XDG_RUNTIME_DIR=str(tmp_path / "none"))
    env.pop("AGENTVISOR_NO_GATEWAY")
    write_config(isolated_home, "gateway: {exec_helper_idle: 0}\n")
    r = subprocess.run(
        [AGENTVISOR, "exec", "--", "echo", "alone"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (r.returncode, r.stdout) == (0, "alone\n")
    assert not (tmp_path / "none" / "agentvisor" / "exec.sock").exists()  # no helper: 0


def write_config(home, text):
    config = home / ".config" / "agentvisor" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(text)


@pytest.fixture
def helper_env(tmp_path, isolated_home):
    """`agentvisor exec` as a user runs it: no gateway, the exec helper allowed."""
    env = dict(os.environ, HOME=str(isolated_home), XDG_RUNTIME_DIR=str(tmp_path / "run"))
    env.pop("AGENTVISOR_NO_GATEWAY")
    ws = tmp_path / "ws"
    ws.mkdir()
    run_dir = tmp_path / "run" / "agentvisor"
    yield {"env": env, "ws": ws, "sock": run_dir / "exec.sock", "dir": run_dir}
    subprocess.run([AGENTVISOR, "exec-helper", "--stop"], env=env, capture_output=True, timeout=30)
    pid = helper_pid(run_dir)
    if pid is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def helper_pid(run_dir):
    try:
        pid = int((run_dir / "exec-helper.lock").read_text())
    except (OSError, ValueError):
        return None
    return pid if os.path.exists(f"/proc/{pid}") else None


def wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def exec_cli(h, *args, env=None, **kw):
    return subprocess.run(
        [AGENTVISOR, "exec", *args],
        env=env or h["env"],
        cwd=h["ws"],
        capture_output=True,
        text=True,
        timeout=60,
        **kw,
    )


def test_exec_leaves_a_helper_that_serves_the_next_runs(helper_env):
    h = helper_env
    env = dict(h["env"], AGENTVISOR_TEST_SECRET_TOKEN="s3cret-value")
    r = exec_cli(h, "--", "echo", "first", env=env)
    assert (r.returncode, r.stdout) == (0, "first\n")
    assert wait_for(lambda: h["sock"].exists() and helper_pid(h["dir"]) is not None)
    pid = helper_pid(h["dir"])
    # The helper keeps what finding files needs, not the caller's credentials.
    environ = Path(f"/proc/{pid}/environ").read_bytes()
    assert b"XDG_RUNTIME_DIR=" in environ and b"s3cret-value" not in environ
    # The next run happens in the helper: its sandbox is the helper's child.
    proc = subprocess.Popen([AGENTVISOR, "exec", "--", "sleep", "20"], env=h["env"], cwd=h["ws"])
    try:
        assert wait_for(
            lambda: (
                subprocess.run(["pgrep", "-P", str(pid), "bwrap"], capture_output=True).returncode
                == 0
            ),
            15,
        )
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(15) != 0
    r = exec_cli(h, "--", "sh", "-c", "echo out; echo err >&2; exit 3")
    assert (r.returncode, r.stdout, r.stderr) == (3, "out\n", "err\n")


def test_the_helper_follows_each_callers_config(helper_env, isolated_home):
    h = helper_env
    exec_cli(h, "--", "true")
    assert wait_for(lambda: h["sock"].exists())
    assert exec_cli(h, "--", "sh", "-c", "echo ok").returncode == 0
    write_config(isolated_home, "rules: [{decision: deny, kind: exec, pattern: 'sh *'}]\n")
    r = exec_cli(h, "--", "sh", "-c", "echo ok")
    assert r.returncode == 125 and "refused" in r.stderr and r.stdout == ""


def test_an_ask_goes_back_to_the_cli(helper_env):
    """The helper has no one to ask: the CLI decides on its own terminal (none here: deny)."""
    h = helper_env
    exec_cli(h, "--", "true")
    assert wait_for(lambda: h["sock"].exists())
    r = exec_cli(h, "--", "sh", "-c", "sudo true")
    assert r.returncode == 125 and "no person can be reached" in r.stderr
    assert helper_pid(h["dir"]) is not None  # the helper is still there afterwards


def test_proxy_runs_stay_with_the_cli(helper_env):
    """Through the egress proxy a destination may ask mid-run: such runs are not the
    helper's (the CLI runs them, on its own terminal)."""
    h = helper_env
    exec_cli(h, "--", "true")
    assert wait_for(lambda: h["sock"].exists())
    pid = helper_pid(h["dir"])
    proc = subprocess.Popen(
        [AGENTVISOR, "exec", "--network", "proxy", "--", "sleep", "20"], env=h["env"], cwd=h["ws"]
    )
    try:
        assert wait_for(
            lambda: (
                subprocess.run(
                    ["pgrep", "-P", str(proc.pid), "bwrap"], capture_output=True
                ).returncode
                == 0
            ),
            15,
        )
        assert (
            subprocess.run(["pgrep", "-P", str(pid), "bwrap"], capture_output=True).returncode != 0
        )
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(15)


def test_the_helper_exits_when_idle_and_when_displaced(helper_env, isolated_home):
    h = helper_env
    write_config(isolated_home, "gateway: {exec_helper_idle: 1}\n")
    exec_cli(h, "--", "true")
    assert wait_for(lambda: helper_pid(h["dir"]) is not None)
    assert wait_for(lambda: helper_pid(h["dir"]) is None and not h["sock"].exists(), 20)
    assert "exiting: idle" in (h["dir"] / "exec-helper.log").read_text()
    # A second helper started while one runs leaves at once.
    write_config(isolated_home, "gateway: {exec_helper_idle: 600}\n")
    exec_cli(h, "--", "true")
    assert wait_for(lambda: h["sock"].exists())
    first = helper_pid(h["dir"])
    r = subprocess.run(
        [AGENTVISOR, "exec-helper", "--idle", "600"], env=h["env"], capture_output=True, timeout=30
    )
    assert r.returncode == 0 and helper_pid(h["dir"]) == first
    # A gateway that takes the socket over sends the helper away.
    proc = subprocess.Popen(
        [AGENTVISOR, "serve", "--port", str(free_port()), "--workspace", str(h["ws"])],
        env=h["env"],
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_for(lambda: helper_pid(h["dir"]) is None, 30)
        assert "a gateway took the socket over" in (h["dir"] / "exec-helper.log").read_text()
        assert h["sock"].exists()  # the gateway's socket stays
    finally:
        proc.terminate()
        proc.wait(10)


def test_no_gateway_means_no_helper_either(helper_env):
    h = helper_env
    env = dict(h["env"], AGENTVISOR_NO_GATEWAY="1")
    assert exec_cli(h, "--", "true", env=env).returncode == 0
    time.sleep(1)
    assert not h["sock"].exists()


def front_end_imports(text):
    import ast

    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom):
            names = [("." * node.level) + (node.module or "")]
            names += [f"{names[0]}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found += [name for name in names if "frontends" in name]
    return found


def test_the_exec_package_imports_no_front_end():
    """The server decodes requests itself: nothing in agentvisor.exec reaches up to the CLI
    (lazy imports inside functions included)."""
    import agentvisor.exec

    package = Path(agentvisor.exec.__file__).parent
    sources = sorted(package.glob("*.py"))
    assert {p.name for p in sources} >= {"client.py", "helper.py", "proto.py", "server.py"}
    assert [(p.name, front_end_imports(p.read_text())) for p in sources] == [
        (p.name, []) for p in sources
    ]
    # Control: the probe sees the import the server had before (a lazy one, in a function).
    assert front_end_imports("def f():\n    from ..frontends.cli import build_parser\n")
    assert front_end_imports("def f():\n    from .. import frontends\n")


def plant_package(h, marker):
    """From inside the sandbox, as a command could: a package `agentvisor` in the workspace
    whose import writes ``marker`` (a host path outside the workspace)."""
    code = f"open({str(marker)!r}, 'w').write('host code ran')\n"
    script = (
        'mkdir -p agentvisor && printf %s "$0" > agentvisor/__init__.py'
        " && cp agentvisor/__init__.py agentvisor/__main__.py"
    )
    r = exec_cli(h, "--", "sh", "-c", script, code)
    assert r.returncode == 0, r.stderr
    assert (h["ws"] / "agentvisor" / "__init__.py").read_text() == code
    return code


def test_host_processes_never_import_from_the_workspace(helper_env, tmp_path):
    """Issue 13.2: a package planted in the caller's directory never runs on the host."""
    h = helper_env
    marker = tmp_path / "host-marker"
    plant_package(h, marker)  # the first run also leaves the helper, from this directory
    assert wait_for(lambda: h["sock"].exists() and helper_pid(h["dir"]) is not None)
    pid = helper_pid(h["dir"])
    # The next runs from the same directory: through the helper, then in-process.
    r = exec_cli(h, "--", "echo", "via helper")
    assert (r.returncode, r.stdout) == (0, "via helper\n"), r.stderr
    assert subprocess.run(["pgrep", "-P", str(pid)], capture_output=True).returncode != 0
    alone = dict(h["env"], AGENTVISOR_NO_GATEWAY="1")
    assert exec_cli(h, "--", "echo", "alone", env=alone).stdout == "alone\n"
    assert not marker.exists()
    # The helper: isolated mode, in /, without the caller's PYTHONPATH.
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"-I" in cmdline and os.readlink(f"/proc/{pid}/cwd") == "/"
    assert b"PYTHONPATH=" not in Path(f"/proc/{pid}/environ").read_bytes()
    # Control: a plain `python -m agentvisor` from that directory runs the planted package.
    env = {k: v for k, v in h["env"].items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "agentvisor", "--version"], cwd=h["ws"], env=env)
    assert marker.read_text() == "host code ran"


def test_a_helper_never_keeps_the_callers_pythonpath(helper_env, tmp_path):
    h = helper_env
    env = dict(h["env"], PYTHONPATH=str(tmp_path / "elsewhere"))
    assert exec_cli(h, "--", "true", env=env).returncode == 0
    assert wait_for(lambda: h["sock"].exists() and helper_pid(h["dir"]) is not None)
    environ = Path(f"/proc/{helper_pid(h['dir'])}/environ").read_bytes()
    assert b"PYTHONPATH=" not in environ and b"XDG_RUNTIME_DIR=" in environ  # control


def test_the_helper_takes_no_program_from_a_callers_path(helper_env, tmp_path):
    """A helper started by a caller whose PATH leads into the workspace runs the system's
    bwrap for that caller and every later one."""
    h = helper_env
    marker = tmp_path / "host-marker"
    fake = f"#!/bin/sh\necho planted > {marker}\nexit 1\n"
    script = 'mkdir -p bin && printf %s "$0" > bin/bwrap && chmod +x bin/bwrap'
    assert exec_cli(h, "--", "sh", "-c", script, fake).returncode == 0
    hostile = dict(h["env"], PATH=f"{h['ws'] / 'bin'}:bin:{h['env']['PATH']}")
    assert wait_for(lambda: h["sock"].exists() and helper_pid(h["dir"]) is not None)
    assert exec_cli(h, "--", "true").returncode == 0
    # The next helper is started by the hostile caller.
    subprocess.run([AGENTVISOR, "exec-helper", "--stop"], env=h["env"], timeout=30)
    for env in (hostile, h["env"], hostile):
        r = exec_cli(h, "--", "echo", "ran", env=env)
        assert (r.returncode, r.stdout) == (0, "ran\n"), r.stderr
        assert wait_for(lambda: helper_pid(h["dir"]) is not None)
    assert not marker.exists()
    subprocess.run(["bwrap"], cwd=h["ws"], env=hostile)  # control: PATH would find it
    assert marker.exists()


def test_no_helper_when_isolated_python_would_not_find_agentvisor(helper_env, tmp_path):
    """Loaded through PYTHONPATH (or user site-packages), agentvisor would not be found by
    the helper's isolated Python: no helper is started, the runs happen in-process."""
    import shutil

    import agentvisor

    copy = tmp_path / "pythonpath"
    shutil.copytree(
        Path(agentvisor.__file__).parent,
        copy / "agentvisor",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    h = helper_env
    env = dict(h["env"], PYTHONPATH=str(copy))
    r = exec_cli(h, "--", "echo", "in-process", env=env)
    assert (r.returncode, r.stdout) == (0, "in-process\n"), r.stderr
    time.sleep(1.5)
    assert not h["sock"].exists() and not (h["dir"] / "exec-helper.log").exists()
    # Control: installed where isolated Python looks, the same run leaves a helper.
    assert exec_cli(h, "--", "true").returncode == 0
    assert wait_for(lambda: h["sock"].exists())


READ_KEY = (
    "import os\ntry:\n    print(open(os.path.join('.ssh', 'id_rsa')).read(), end='')\n"
    "except OSError:\n    print('refused')\n"
)


def test_the_helper_protects_each_callers_home(helper_env, tmp_path):
    """A helper started by one caller keeps its HOME; a caller with another HOME (whose
    workspace holds it) has its own ~/.ssh hidden too, as in a run without the helper."""
    h = helper_env
    other = tmp_path / "other-home"
    (other / ".ssh").mkdir(parents=True)
    (other / ".ssh" / "id_rsa").write_text("PRIVATE KEY\n")
    (other / "read.py").write_text(READ_KEY)
    assert exec_cli(h, "--", "true").returncode == 0
    assert wait_for(lambda: h["sock"].exists() and helper_pid(h["dir"]) is not None)
    caller = dict(h["env"], HOME=str(other))
    r = subprocess.run([AGENTVISOR, "exec", "--", "python3", "read.py"], env=caller, cwd=other,
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert helper_pid(h["dir"]) is not None  # the run was the helper's
    assert r.stdout == "refused\n", r.stdout + r.stderr
    # Control: for a caller whose HOME is elsewhere that file is not a protected path.
    alone = dict(h["env"], AGENTVISOR_NO_GATEWAY="1")
    r = subprocess.run([AGENTVISOR, "exec", "--", "python3", "read.py"], env=alone, cwd=other,
                       capture_output=True, text=True, timeout=60)  # fmt: skip
    assert r.stdout == "PRIVATE KEY\n", r.stdout + r.stderr


PLANT_STATE = (
    "import os\nfor d in ('state/agentvisor', 'cache/agentvisor'):\n    try:\n"
    "        os.makedirs(d, exist_ok=True)\n"
    "        open(d + '/state.db', 'w').write('planted')\n        print('planted', d)\n"
    "    except OSError:\n        print('refused', d)\n"
)


def test_the_helper_protects_each_callers_state_and_cache(helper_env):
    """A caller whose XDG_STATE_HOME and XDG_CACHE_HOME lie in its workspace keeps its
    grants and cached defaults there when it runs without the helper (after the helper's
    idle time): a run through the helper may not plant them."""
    h = helper_env
    (h["ws"] / "plant.py").write_text(PLANT_STATE)
    assert exec_cli(h, "--", "true").returncode == 0
    assert wait_for(lambda: h["sock"].exists() and helper_pid(h["dir"]) is not None)
    caller = dict(
        h["env"], XDG_STATE_HOME=str(h["ws"] / "state"), XDG_CACHE_HOME=str(h["ws"] / "cache")
    )
    r = exec_cli(h, "--", "python3", "plant.py", env=caller)
    assert r.stdout == "refused state/agentvisor\nrefused cache/agentvisor\n", r.stdout + r.stderr
    # Control: for a caller whose directories are elsewhere, the probe plants.
    r = exec_cli(h, "--", "python3", "plant.py")
    assert r.stdout == "planted state/agentvisor\nplanted cache/agentvisor\n", r.stderr
