"""sandbox.disk_mb under `agentvisor exec` (issue 13): the run's changeset lives on a
size-limited image, so a command cannot reserve more of the host's disk through the
workspace than the quota; a caller that cannot mount the image is refused, naming the key
and the config file."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agentvisor.changes import Changesets
from agentvisor.errors import LimitNotEnforced
from agentvisor.exec.request import ExecRequest
from agentvisor.exec.run import run
from agentvisor.records import replace
from agentvisor.sandbox import limits
from tests.conftest import AGENTVISOR, is_root, requires_bwrap

pytestmark = requires_bwrap

needs_loop = pytest.mark.skipif(
    not (is_root and os.path.exists("/dev/loop-control")),
    reason="the changeset's image is loop-mounted: needs root and loop devices",
)
# The per-file limit raised above the attempt, so the quota is what stops it.
QUOTA = "sandbox: {disk_mb: 64, file_size_mb: 10240}\n"
RESERVE = "echo small > small.txt; fallocate -l 6G big; echo fallocate=$?"


@pytest.fixture
def home(isolated_home: Path) -> Path:
    return isolated_home


def exec_with(
    workspace: Path, home: Path, config: Path, command: str
) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    return subprocess.run(
        [AGENTVISOR, "exec", "--config", str(config), "--", "sh", "-c", command],
        cwd=workspace,
        env=dict(environ, HOME=str(home), AGENTVISOR_NO_GATEWAY="1"),
        capture_output=True,
        text=True,
        timeout=120,
    )


def forget_changesets(workspace: Path, home: Path) -> None:
    """What a person does with held changes (`agentvisor discard`); the image goes too."""
    changesets = Changesets(workspace, root=home / ".local" / "state" / "agentvisor" / "changes")
    for session in changesets.sessions():
        session.remove()
        assert not os.path.ismount(session.layers)


@needs_loop
def test_exec_cannot_reserve_more_than_disk_mb_and_the_workspace_stays_unchanged(
    workspace, home, tmp_path
):
    config = tmp_path / "operator.yaml"
    config.write_text(QUOTA)
    try:
        r = exec_with(workspace, home, config, RESERVE)
        assert "fallocate=1" in r.stdout and "No space left on device" in r.stderr, r.stderr
        assert r.returncode == 0  # the command's own status: its last command's
        assert "sandbox.disk_mb reached" in r.stderr and "agentvisor apply" in r.stderr
        assert list(workspace.iterdir()) == []  # nothing of a cut-short run was applied
    finally:
        forget_changesets(workspace, home)


@needs_loop
def test_control_without_disk_mb_the_same_reservation_succeeds(workspace, home, tmp_path):
    config = tmp_path / "operator.yaml"
    config.write_text("sandbox: {file_size_mb: 10240}\nworkspace: {mode: direct}\n")
    r = exec_with(workspace, home, config, RESERVE.replace("6G", "256M"))
    assert "fallocate=0" in r.stdout, r.stderr
    assert (workspace / "big").stat().st_size == 256 * 2**20


def test_a_caller_that_cannot_mount_the_image_is_refused_naming_key_and_file(
    workspace, tmp_path, monkeypatch
):
    config = tmp_path / "operator.yaml"
    config.write_text(QUOTA)
    request = ExecRequest(argv=("true",), cwd=str(workspace), config=str(config))
    monkeypatch.setattr(limits.os, "geteuid", lambda: 1000)
    with pytest.raises(LimitNotEnforced) as refused:
        run(request, say=lambda text: None)
    message = str(refused.value)
    assert "sandbox.disk_mb" in message and "needs root" in message, message
    assert str(config) in message, message
    monkeypatch.undo()
    if is_root and os.path.exists("/dev/loop-control"):  # control: root mounts it
        assert run(replace(request, dry_run=True), say=lambda text: None) == 0
    # In workspace.mode direct nothing bounds the workspace: refused whoever runs it.
    config.write_text(QUOTA + "workspace: {mode: direct}\n")
    with pytest.raises(LimitNotEnforced, match="land there directly"):
        run(request, say=lambda text: None)
