"""Own processes only: pid/ipc/uts namespaces, nothing outlives the command, no stray fds."""

from __future__ import annotations

import os
import subprocess
import time

from tests.conftest import requires_bwrap
from tests.sandbox.helpers import py_inside, py_outside, sandbox, text

pytestmark = requires_bwrap


def test_host_processes_invisible_and_unkillable(workspace):
    victim = subprocess.Popen(["sleep", "60"])
    try:
        probe = f"""
import os, signal
try:
    seen = b"sleep" in open("/proc/{victim.pid}/cmdline", "rb").read()
except OSError:
    seen = False
print("VISIBLE" if seen else "invisible")
try:
    os.kill({victim.pid}, signal.SIGKILL); print("sent")
except OSError as e:
    print("refused", e)
"""
        assert "VISIBLE" in py_outside(probe.replace("signal.SIGKILL", "0")).stdout  # control
        out = text(py_inside(workspace, probe))
        assert "invisible" in out
        time.sleep(0.2)
        assert victim.poll() is None
    finally:
        victim.kill()


def test_pid_namespace_starts_small(workspace):
    probe = "import os; print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))"
    out = text(py_inside(workspace, probe))
    assert max(eval(out)) < 10  # only the sandbox's own processes


def test_hostname_is_private(workspace):
    assert text(sandbox(workspace).run(["hostname"])).strip() == "agentvisor"


def test_background_processes_end_with_the_command(workspace):
    marker = "agentvisor-survive-" + os.urandom(4).hex()
    script = (
        f"setsid sh -c 'sleep 300; : {marker}' >/dev/null 2>&1 </dev/null & "
        f"nohup sh -c 'sleep 301; : {marker}' >/dev/null 2>&1 & echo started"
    )
    result = sandbox(workspace).run(["sh", "-c", script])
    assert b"started" in result.stdout
    time.sleep(0.3)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert left == []
    # Control: the same script outside leaves them running.
    subprocess.run(["sh", "-c", script], capture_output=True, timeout=10)
    time.sleep(0.3)
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True).stdout.split()
    assert left
    subprocess.run(["pkill", "-f", marker])


def test_timeout_ends_the_whole_tree(workspace):
    marker = "agentvisor-timeout-" + os.urandom(4).hex()
    result = sandbox(workspace).run(["sh", "-c", f"(sleep 300; : {marker}) & sleep 300"], timeout=1)
    assert result.timed_out and result.exit_code == 124
    time.sleep(0.3)
    assert subprocess.run(["pgrep", "-f", marker], capture_output=True).stdout == b""


def test_only_standard_fds_inherited(workspace):
    r, w = os.pipe()
    os.set_inheritable(r, True)
    try:
        probe = "import os; print(sorted(int(f) for f in os.listdir('/proc/self/fd')))"
        control = subprocess.run(
            ["python3", "-c", probe], capture_output=True, text=True, close_fds=False
        )
        assert str(r) in control.stdout  # control: an inheritable fd leaks to a plain child
        out = text(py_inside(workspace, probe))
        assert eval(out) == [0, 1, 2, 3]  # 3 is listdir's own handle
    finally:
        os.close(r)
        os.close(w)
