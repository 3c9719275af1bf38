"""The sandbox is never host uid 0, and host-global kernel files are read-only in it."""

from __future__ import annotations

import os

import pytest

from agentvisor.sandbox.identity import sandbox_user
from agentvisor.sandbox.persistent import PersistentSandbox
from tests.conftest import requires_bwrap
from tests.sandbox.helpers import py_inside, py_outside, sandbox, text

pytestmark = requires_bwrap
root_only = pytest.mark.skipif(os.getuid() != 0, reason="the identity switch is for root callers")

# open(O_WRONLY) is where the kernel checks the permission; nothing is ever written.
SYSCTLS = ("/proc/sys/kernel/core_pattern", "/proc/sys/kernel/panic", "/proc/sys/vm/drop_caches")
OPEN_FOR_WRITING = f"""
import os
for path in {SYSCTLS!r}:
    try:
        os.close(os.open(path, os.O_WRONLY))
        print(path, "writable")
    except OSError as exc:
        print(path, "refused", exc.errno)
"""

PROC_MOUNTS = """
for line in open("/proc/self/mountinfo"):
    fields = line.split()
    if fields[4] in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
        print(fields[4], fields[5].split(",")[0])
"""


@root_only
def test_root_caller_runs_unprivileged_in_a_writable_root_owned_workspace(workspace):
    assert workspace.stat().st_uid == 0  # the case that needs an idmapped view
    (workspace / "existing").write_text("old")
    result = sandbox(workspace).run(
        ["sh", "-c", "id -u; id -G; echo new > made && echo more >> existing && echo wrote"]
    )
    lines = text(result).split("\n")
    assert lines[0] != "0" and "0" not in lines[1].split(), text(result)
    assert "wrote" in text(result)
    # What the sandbox wrote belongs to the workspace's owner, not to the sandbox user.
    assert (workspace / "made").stat().st_uid == 0
    assert (workspace / "existing").read_text() == "oldmore\n"
    assert os.getuid() == 0  # control: the caller is root


@root_only
def test_root_caller_cannot_open_host_sysctls_for_writing(workspace):
    inside = text(py_inside(workspace, OPEN_FOR_WRITING))
    assert "writable" not in inside and inside.count("refused") == 3, inside
    # Control: the same probe as the root caller outside opens them (and writes nothing).
    outside = py_outside(OPEN_FOR_WRITING).stdout
    assert outside.count("writable") == 3, outside


def test_host_global_proc_entries_are_read_only_mounts_whatever_the_uid(workspace):
    mounts = dict(line.split() for line in text(py_inside(workspace, PROC_MOUNTS)).splitlines())
    assert mounts.get("/proc/sys") == "ro", mounts
    assert all(flag == "ro" for flag in mounts.values()), mounts
    # Control: the host's own /proc/sys is no mount of its own here.
    assert "/proc/sys" not in py_outside(PROC_MOUNTS).stdout


@root_only
def test_session_sandbox_runs_unprivileged_too(workspace):
    box = PersistentSandbox(sandbox(workspace).backend)  # type: ignore[arg-type]
    try:
        result = box.run(["sh", "-c", "id -u; touch from-session && echo wrote"])
    finally:
        box.close()
    assert text(result).split()[0] != "0" and "wrote" in text(result), text(result)
    assert (workspace / "from-session").stat().st_uid == 0


@root_only
def test_identity_follows_the_workspace_owner(tmp_path):
    owned = tmp_path / "owned"
    owned.mkdir()
    os.chown(owned, 4321, 4321)
    user = sandbox_user(owned)
    assert (user.uid, user.gid) == (4321, 4321) and "workspace owner" in user.why
    result = sandbox(owned).run(["sh", "-c", "id -u; touch mine"])
    assert text(result).split()[0] == "4321", text(result)
    assert (owned / "mine").stat().st_uid == 4321  # no idmapped view needed
    # Control: a root-owned workspace gets the sandbox system user (or nobody).
    assert sandbox_user(tmp_path).uid not in (0, 4321)


def test_doctor_names_the_identity_in_force(workspace):
    from agentvisor.config import SandboxConfig
    from agentvisor.frontends.cli.doctor_checks import check_identity

    check = check_identity(SandboxConfig(workspace=str(workspace)))
    assert check.status == "ok" and f"uid {sandbox_user(workspace).uid}" in check.found
    if os.getuid() == 0:
        assert "idmapped mount" in check.found, check.found


@root_only
def test_limits_still_apply_to_the_unprivileged_sandbox(workspace):
    result = sandbox(workspace, file_size_mb=3).run(["sh", "-c", "ulimit -f; ulimit -c"])
    assert text(result).split() == [str(3 * 2048), "0"], text(result)  # 512-byte blocks (dash)
    too_big = sandbox(workspace, file_size_mb=1).run(
        ["sh", "-c", "head -c 2000000 /dev/zero > big; echo $?"]
    )
    assert (workspace / "big").stat().st_size == 1024 * 1024, text(too_big)


@root_only
def test_over_a_changeset_too(workspace, tmp_path, isolated_home):
    from agentvisor.config import config_from_dict
    from agentvisor.gateway import Gateway
    from agentvisor.state.events import SQLiteAuditLog

    (workspace / "existing").write_text("old\n")
    gateway = Gateway(
        config_from_dict({}), workspace=workspace, audit=SQLiteAuditLog(tmp_path / "a.db")
    )
    try:
        assert gateway.changesets is not None  # the default workspace.mode sets one up
        session = gateway.open_session(toolsets=["all"])
        run = gateway.call(session, "terminal", {"command": "id -u; echo more >> existing"})
        assert run.text.split()[0] not in ("0", "[exit"), run.text
        assert not gateway.call(session, "write_file", {"path": "t.txt", "content": "a\n"}).is_error
        edit = gateway.call(session, "terminal", {"command": "echo b >> t.txt && cat t.txt"})
        assert "a\nb" in edit.text, edit.text  # the sandbox user edits what the tool wrote
    finally:
        gateway.close()
    # Applied to the workspace, and still its owner's (root's) files.
    assert (workspace / "existing").read_text() == "old\nmore\n"
    assert (workspace / "t.txt").read_text() == "a\nb\n"
    assert {(workspace / n).stat().st_uid for n in ("existing", "t.txt")} == {0}
