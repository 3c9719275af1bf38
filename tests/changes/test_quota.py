"""sandbox.disk_mb bounds what a session writes to the workspace: its changeset's layers
live on a size-limited image (agentvisor.changes.quota)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentvisor.approvals import ApprovalBroker
from agentvisor.changes import Changesets, Settings, quota
from agentvisor.config import config_from_dict
from agentvisor.errors import LimitNotEnforced
from agentvisor.gateway import Gateway
from agentvisor.state.events import SQLiteAuditLog
from tests.conftest import is_root, requires_bwrap

pytestmark = [
    requires_bwrap,
    pytest.mark.skipif(
        not (is_root and os.path.exists("/dev/loop-control")),
        reason="the changeset's image is loop-mounted: needs root and loop devices",
    ),
]

# 40 MiB in all: the scratch tmpfs take half, each changeset holds the other 20 MiB.
DISK_MB = 40


def quota_gateway(
    workspace: Path, tmp_path: Path, mounts: tuple[str, ...] = (), **workspace_keys: object
) -> Gateway:
    cfg = config_from_dict(
        {
            "approvals": {"timeout": 5},
            "sandbox": {"timeout": 60, "disk_mb": DISK_MB, "mounts": list(mounts)},
            "workspace": workspace_keys,
        }
    )
    broker = ApprovalBroker(cfg, channels=[], grants=None)
    return Gateway(
        cfg, workspace=workspace, broker=broker, audit=SQLiteAuditLog(tmp_path / "audit.db")
    )


def terminal(gateway: Gateway, session: object, command: str) -> str:
    out = gateway.call(session, "terminal", {"command": command})  # type: ignore[arg-type]
    return out.text


def forget_changesets(gateway: Gateway) -> None:
    """What a person does with held changes (`agentvisor discard`): the image goes too."""
    assert gateway.changesets is not None
    for changeset in gateway.changesets.sessions():
        changeset.remove()
        assert not os.path.ismount(changeset.layers)


def test_a_session_cannot_write_past_its_quota_into_the_workspace(repo, tmp_path):
    gateway = quota_gateway(repo, tmp_path)
    try:
        session = gateway.open_session(agent="filler", toolsets=["all"])
        # Control: under the quota the write succeeds and reaches the workspace.
        small = terminal(gateway, session, "head -c 4M /dev/zero > small.bin && echo wrote")
        assert "wrote" in small and "[exit 0" in small, small
        assert (repo / "small.bin").stat().st_size == 4 * 2**20

        over = terminal(gateway, session, "head -c 30M /dev/zero > big.bin && echo wrote")
        assert "No space left on device" in over, over
        assert "wrote" not in over.replace("[agentvisor", ""), over
        assert "sandbox.disk_mb reached" in over, over  # the agent is told why
        # The cut-short file waits for a person; the real workspace never sees it.
        assert not (repo / "big.bin").exists()
        assert (repo / "small.bin").stat().st_size == 4 * 2**20
    finally:
        gateway.close()
        forget_changesets(gateway)


def test_scratch_space_and_workspace_share_the_quota(repo, tmp_path):
    gateway = quota_gateway(repo, tmp_path)
    try:
        session = gateway.open_session(agent="filler", toolsets=["all"])
        # /tmp holds a fifth of disk_mb (8 MiB): more fails there as in the workspace.
        out = terminal(gateway, session, "head -c 12M /dev/zero > /tmp/big && echo wrote")
        assert "No space left on device" in out, out
        # Control (the session's /tmp keeps what the failed write left: remove it first).
        out = terminal(gateway, session, "rm /tmp/big; head -c 4M /dev/zero > /tmp/s && echo wrote")
        assert "wrote" in out, out
    finally:
        gateway.close()


def test_the_changeset_image_goes_with_the_session(repo, tmp_path):
    gateway = quota_gateway(repo, tmp_path)
    session = gateway.open_session(agent="a", toolsets=["all"])
    terminal(gateway, session, "echo hi > note.txt")
    changeset = session.changeset
    assert changeset is not None
    assert os.path.ismount(changeset.layers)
    assert changeset.upper == changeset.layers / "upper"
    gateway.close()  # everything applied: nothing pending, the changeset goes
    assert not os.path.ismount(changeset.layers)
    assert not changeset.root.exists()
    assert (repo / "note.txt").read_text() == "hi\n"


def test_where_writes_land_directly_disk_mb_is_refused(repo, tmp_path):
    with pytest.raises(LimitNotEnforced, match=r"sandbox\.disk_mb: cannot be enforced here"):
        quota_gateway(repo, tmp_path, mode="direct")
    data = tmp_path / "data"
    data.mkdir()
    with pytest.raises(LimitNotEnforced, match=r"sandbox\.disk_mb: .*writable mount"):
        quota_gateway(repo, tmp_path, mounts=(f"{data}:/data:rw",))
    # Control: a read-only mount takes no writes, so the quota holds.
    quota_gateway(repo, tmp_path, mounts=(f"{data}:/data:ro",)).close()


def test_pending_writes_outlive_the_mount(workspace, tmp_path):
    """After a reboot (the image unmounted) the changeset's writes are still there: the
    first reader mounts the image again."""
    changesets = Changesets(workspace, Settings(quota_bytes=8 * 2**20), root=tmp_path / "cs")
    changeset = changesets.start("s-1")
    (changeset.upper / "kept.txt").write_text("pending\n")
    quota.unmount(changeset.layers)
    assert not (changeset.upper / "kept.txt").exists()  # control: unmounted, out of sight

    again = Changesets(workspace, root=tmp_path / "cs").session("s-1")
    assert [p.path for p in Changesets(workspace, root=tmp_path / "cs").pending(again)] == [
        "kept.txt"
    ]
    again.remove()
    assert not os.path.ismount(again.layers)
