"""Known gaps of `agentvisor exec` (which writes to the workspace directly, without a
changeset; docs/changesets.md "Limits"): git files beyond ``.git/hooks`` and ``.git/config``
that make the user's own git run code. Kept as strict xfails so that the fix flips them."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import requires_bwrap, run_cli

pytestmark = requires_bwrap

GIT = "/usr/bin/git"
REDIRECT = r"""
mkdir -p evil/hooks evil/refs evil/objects
printf '[core]\n\tfsmonitor = "touch {marker}; false"\n' > evil/config
echo ../evil > .git/commondir
echo probe-ran
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    subprocess.run([GIT, "init", "-q", str(ws)], check=True)
    return ws


def users_git_status(repo: Path) -> None:
    env = dict(os.environ, GIT_CONFIG_GLOBAL="/dev/null")
    subprocess.run([GIT, "-C", str(repo), "status"], env=env, capture_output=True)


@pytest.mark.xfail(
    strict=True,
    reason="exec writes directly and .git/commondir is not read-only: a stand-in for it "
    "would break git during the run (reported by the red team; not fixed here)",
)
def test_a_commondir_planted_by_exec_runs_nothing_at_the_users_next_git(repo, tmp_path):
    marker = tmp_path / "PLANTED-CODE-RAN"
    (repo / "attack.sh").write_text(REDIRECT.format(marker=marker))
    r = run_cli("exec", "--workspace", str(repo), "--", "sh", "attack.sh", cwd=repo)
    assert "probe-ran" in r.stdout, r.stderr
    users_git_status(repo)
    assert not marker.exists()


def test_control_the_same_commondir_written_on_the_host_runs_the_planted_code(repo, tmp_path):
    marker = tmp_path / "PLANTED-CODE-RAN"
    (repo / "attack.sh").write_text(REDIRECT.format(marker=marker))
    subprocess.run(["sh", "attack.sh"], cwd=repo, check=True, capture_output=True)
    users_git_status(repo)
    assert marker.exists()
