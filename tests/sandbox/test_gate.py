"""The gate: a bwrap sandbox's command starts only after agentvisor applied its limits."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

from agentvisor.sandbox import runner
from tests.conftest import requires_bwrap
from tests.sandbox.helpers import sandbox

pytestmark = requires_bwrap


def start_held(workspace, marker):
    """A sandbox whose command would create ``marker``, started but not yet let go."""
    backend = sandbox(workspace).backend
    prepared = backend.prepare(["sh", "-c", f"echo ran > {marker}"])
    proc = subprocess.Popen(
        prepared.argv,
        env=dict(prepared.env),
        pass_fds=tuple(prepared.pass_fds),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    prepared.close_fds()
    return backend, prepared.gate, proc


def test_the_command_waits_for_the_go_ahead(workspace):
    marker = workspace / "ran"
    backend, gate, proc = start_held(workspace, marker)
    try:
        time.sleep(1)
        assert not marker.exists() and proc.poll() is None  # held before its command
        os.write(gate.go, b"1")  # the control: the same sandbox, let go, runs it
        assert proc.wait(30) == 0 and marker.read_text() == "ran\n"
    finally:
        gate.close()
        backend.layout.cleanup()


def test_if_agentvisor_dies_first_the_command_never_runs(workspace):
    """Our end closing (a crash) must not read as the go-ahead: the block fd is the pipe
    reopened read-write, so the sandbox itself keeps a writer and waits on."""
    marker = workspace / "ran"
    backend, gate, proc = start_held(workspace, marker)
    try:
        child = runner._child_pid(gate._read_info())
        assert child is not None
        gate.close()  # what our death would do to our ends
        time.sleep(1.5)
        assert not marker.exists()
        assert os.path.exists(f"/proc/{child}")  # still held, not running the command
    finally:
        proc.kill()
        proc.wait()
        os.kill(child, 9)
        backend.layout.cleanup()


def test_bwraps_report_is_read_to_its_end():
    """bwrap writes its report in pieces; a reader that leaves after the first one kills it
    with SIGPIPE (a sandbox that then never starts)."""
    gate = runner.Gate()
    os.close(gate.block)

    def write() -> None:
        os.write(gate.info_write, b'{\n    "child-pid": 4242,\n')
        time.sleep(0.2)
        os.write(gate.info_write, b'    "mnt-namespace": 4026532178\n}\n')
        os.close(gate.info_write)

    writer = threading.Thread(target=write)
    writer.start()
    info = gate._read_info()
    writer.join()
    gate.close()
    assert info.endswith(b"}\n") and runner._child_pid(info) == 4242
    assert runner._child_pid(b"") is None
    assert runner._child_pid(b'{"child-pid": x}') is None


def test_many_quick_runs_all_start(workspace):
    box = sandbox(workspace)
    results = [box.run(["true"], timeout=20) for _ in range(40)]
    assert [r.exit_code for r in results] == [0] * 40


def test_a_server_reaps_what_bwrap_leaves_behind(workspace):
    """bwrap exits a moment before its namespace child; an adopting server reaps that
    child at once, so no zombie is left counting against the slot's pids.max."""
    code = f"""
import os
from agentvisor.sandbox import Sandbox, runner
runner.adopt_orphans()
box = Sandbox(workspace={str(workspace)!r})
leftovers = []
for _ in range(5):
    box.run(["true"])
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = open(f"/proc/{{name}}/stat").read()
            except OSError:
                continue
            if stat.split(")")[1].split()[:2] == ["Z", str(os.getpid())]:
                leftovers.append(name)
print("zombies", len(leftovers))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.stdout.strip().splitlines()[-1] == "zombies 0", r.stdout + r.stderr
