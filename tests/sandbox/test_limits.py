"""Limits: memory, pids, CPU time, file size and wall time, and no silent downgrade."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentvisor.config import SandboxConfig
from agentvisor.errors import LimitNotEnforced
from agentvisor.sandbox import limits
from tests.conftest import requires_bwrap
from tests.sandbox.helpers import py_inside, sandbox, text

pytestmark = requires_bwrap

HOG = """
chunks = []
for i in range({mb}):
    chunks.append(bytearray(1024 * 1024))
print("HELD", len(chunks))
"""


def test_memory_limit_stops_a_hog(workspace):
    result = py_inside(workspace, HOG.format(mb=256), memory_mb=64)
    assert b"HELD" not in result.stdout
    assert result.exit_code != 0
    control = py_inside(workspace, HOG.format(mb=256), memory_mb=1024)
    assert b"HELD 256" in control.stdout


def test_pids_limit_contains_forks(workspace):
    probe = """
import os, time
n = 0
try:
    for _ in range(200):
        if os.fork() == 0:
            time.sleep(5); os._exit(0)
        n += 1
except OSError as e:
    print("stopped", n, e)
print("forked", n)
"""
    out = text(py_inside(workspace, probe, pids=32))
    assert "stopped" in out
    assert int(out.split("forked")[1].split()[0]) < 32
    assert "stopped" not in text(py_inside(workspace, probe, pids=512))  # control


def test_cpu_time_limit(workspace):
    result = py_inside(workspace, "while True: pass", timeout=30, cpu_seconds=1)
    assert not result.timed_out
    assert result.exit_code in (128 + 9, 128 + 24)  # SIGKILL or SIGXCPU
    assert result.duration < 20


def test_file_size_limit(workspace):
    out = text(
        sandbox(workspace, file_size_mb=1).run(
            ["sh", "-c", "dd if=/dev/zero of=big bs=1M count=4 2>&1; echo rc=$?"]
        )
    )
    assert (workspace / "big").stat().st_size <= 1024 * 1024
    assert "rc=0" not in out


def test_wall_time_limit(workspace):
    result = sandbox(workspace).run(["sleep", "30"], timeout=1)
    assert result.timed_out and result.exit_code == 124
    assert result.duration < 10


def test_unenforceable_limit_is_an_error(monkeypatch, workspace):
    monkeypatch.setattr(limits, "cgroup_bases", lambda: {})
    monkeypatch.setattr(limits.os, "getuid", lambda: 0)
    with pytest.raises(LimitNotEnforced, match=r"sandbox\.pids"):
        limits.check_enforced(limits.plan_limits(SandboxConfig()), SandboxConfig())
    allowed = SandboxConfig(allow_unenforced_limits=True)
    warnings = limits.check_enforced(limits.plan_limits(allowed), allowed)
    assert warnings and "running anyway" in warnings[0]


def test_without_cgroups_memory_falls_back_to_rlimit(monkeypatch):
    monkeypatch.setattr(limits, "cgroup_bases", lambda: {})
    plan = limits.plan_limits(SandboxConfig(memory_mb=100))
    assert plan.rlimits[limits.resource.RLIMIT_AS] == (100 * limits.MIB,) * 2
    assert "per process" in plan.mechanisms["memory_mb"]


def test_a_slot_whose_processes_are_not_gone_is_not_reused():
    """A killed process still counts against pids.max until it is reaped; a run put in
    such a slot could not even start its first process. The next slot serves instead."""
    import os

    plan = limits.plan_limits(SandboxConfig())
    if "pids" not in plan.cgroup_bases:
        pytest.skip("no pids cgroup here")
    first = plan.acquire_cgroup()
    pids_dir = next(d for d in first.dirs if os.path.exists(f"{d}/pids.current"))
    child = os.fork()
    if child == 0:
        time.sleep(0.3)
        os._exit(0)
    try:
        with open(f"{pids_dir}/cgroup.procs", "w") as f:
            f.write(str(child))
        while Path(f"/proc/{child}/stat").read_text().split(")")[1].split()[0] != "Z":
            time.sleep(0.01)
        # A zombie now: in no task list, yet counted in pids.current.
        assert int(Path(f"{pids_dir}/pids.current").read_text()) == 1
        first.release()
        plan._next_slot = int(first.dirs[0].rsplit("-", 1)[1])  # search from that slot
        second = plan.acquire_cgroup()
        second.release()
        assert second.dirs != first.dirs
    finally:
        os.waitpid(child, 0)


# Fills each scratch tmpfs until the kernel refuses, and prints the total it took.
FILL_SCRATCH = """
import os
total = 0
for d in ("/tmp", "/var/tmp", "/run", "/dev/shm", os.environ["HOME"]):
    with open(os.path.join(d, "fill"), "wb") as f:
        try:
            while True:
                total += f.write(b"x" * 65536)
                f.flush()
        except OSError as exc:
            assert exc.errno == 28, exc  # ENOSPC
print(total)
"""


def test_disk_mb_bounds_all_scratch_space_together(workspace):
    # The scratch tmpfs hold half of disk_mb (the rest is the changeset's, see
    # tests/changes/test_quota.py): 20 MiB together, /tmp 8 MiB of them.
    box = sandbox(workspace, disk_mb=40, allow_unenforced_limits=True)
    over = box.run(["sh", "-c", "fallocate -l 12M /tmp/big && echo reserved"])
    assert b"reserved" not in over.stdout and b"No space left" in over.stderr, text(over)
    under = box.run(["sh", "-c", "fallocate -l 4M /tmp/small && echo reserved"])
    assert b"reserved" in under.stdout, text(under)  # control: under the quota
    written = int(box.run(["python3", "-c", FILL_SCRATCH]).stdout)
    assert 10 * 2**20 < written <= 20 * 2**20, written
    # Control: without the quota each scratch tmpfs holds tmp_size_mb on its own.
    plain = sandbox(workspace, tmp_size_mb=8)
    assert int(plain.run(["python3", "-c", FILL_SCRATCH]).stdout) > 20 * 2**20


# Reserves 24 MiB in a file at the top of every tmpfs mount the sandbox's mount table
# lists as writable (writable for this user or not); prints where it got them.
RESERVE_IN_EVERY_TMPFS = """
import os
for line in open("/proc/self/mounts"):
    _, where, kind, options = line.split()[:4]
    if kind != "tmpfs" or "rw" not in options.split(","):
        continue
    path = os.path.join(where, ".reserve")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError:
        continue
    try:
        os.posix_fallocate(fd, 0, 24 << 20)
        print(where)
    except OSError:
        pass
    finally:
        os.close(fd)
        os.unlink(path)
"""


def test_disk_mb_bounds_every_writable_tmpfs(workspace):
    # bwrap's own /dev was a tmpfs the sandbox's user owned, of half the machine's memory.
    box = sandbox(workspace, disk_mb=40, allow_unenforced_limits=True)
    result = box.run(["python3", "-c", RESERVE_IN_EVERY_TMPFS])
    assert result.exit_code == 0 and result.stdout == b"", text(result)
    # Control: the probe reserves where a tmpfs is larger (no disk_mb).
    plain = sandbox(workspace, tmp_size_mb=64)
    assert b"/tmp\n" in plain.run(["python3", "-c", RESERVE_IN_EVERY_TMPFS]).stdout


def test_disk_mb_the_workspace_cannot_honour_is_refused(workspace):
    # A one-off run writes the workspace directly (no changeset to bound).
    with pytest.raises(LimitNotEnforced, match=r"sandbox\.disk_mb: cannot be enforced here"):
        sandbox(workspace, disk_mb=20)


def test_disk_mb_over_changesets_needs_root_to_mount_their_image(monkeypatch):
    cfg = SandboxConfig(disk_mb=20)
    monkeypatch.setattr(limits.os, "geteuid", lambda: 1000)
    plan = limits.plan_limits(cfg, workspace_quota=True)
    assert "needs root" in plan.unenforced["disk_mb"]
    monkeypatch.setattr(limits.os, "geteuid", lambda: 0)  # control: root mounts it
    plan = limits.plan_limits(cfg, workspace_quota=True)
    assert "disk_mb" not in plan.unenforced and "ext4 image" in plan.mechanisms["disk_mb"]
