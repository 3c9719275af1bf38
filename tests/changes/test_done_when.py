"""The issue's "Done when": an agent session that rewrites git internals at any depth,
plants a nested repository, deletes a source folder and edits ordinary files."""

from __future__ import annotations

import json
import subprocess

from tests.changes.conftest import GIT, agent_runs, cli, git, make_gateway
from tests.conftest import requires_bwrap

pytestmark = requires_bwrap

ATTACK = r"""
set -e
echo "more" >> README.md
echo "print('new')" > src/new.py
rm -rf src
# git internals of the workspace's own repository
mkdir -p .git/info && printf '* filter=pwn\n' > .git/info/attributes
mkdir -p .git/modules/sub
printf '[core]\n\tfsmonitor = touch {marker}\n' > .git/modules/sub/config
# hooks under the core.hooksPath the user's config sets (husky)
mkdir -p .husky/_ && printf '#!/bin/sh\ntouch {marker}\n' > .husky/_/pre-commit
chmod +x .husky/_/pre-commit
# a nested repository with its own fsmonitor, registered as a gitlink
mkdir -p vendor/lib && cd vendor/lib && git init -q
printf '[core]\n\tfsmonitor = touch {marker}\n' >> .git/config
git -c user.name=a -c user.email=a@b commit -q --allow-empty -m x
cd ../..
git update-index --add --cacheinfo 160000,$(git -C vendor/lib rev-parse HEAD),vendor/lib
mkdir deep && echo 'touch {marker}' > deep/.envrc
echo "ordinary" > notes.txt
echo "../../tmp/elsewhere" > .git/commondir
"""


def test_an_attacking_session_leaves_only_its_ordinary_edits(
    gateway, repo, isolated_home, tmp_path
):
    git(repo, "config", "core.hooksPath", ".husky/_")
    marker = tmp_path / "PLANTED-CODE-RAN"
    session = gateway.open_session(agent="attacker", toolsets=["all"])
    output = agent_runs(gateway, session, ATTACK.replace("{marker}", str(marker)))
    assert "[exit 0" in output, output
    assert "wait for a person" in output  # the agent is told what was held

    # Ordinary edits applied; the deleted folder is gone from the real workspace.
    assert (repo / "README.md").read_text() == "# project\nmore\n"
    assert (repo / "notes.txt").read_text() == "ordinary\n"
    assert not (repo / "src").exists()
    # Nothing of the host-run class applied.
    for planted in (
        ".git/commondir",
        ".git/info/attributes",
        ".git/modules",
        ".husky/_/pre-commit",
        "vendor/lib/.git",
        "deep/.envrc",
    ):
        assert not (repo / planted).exists(), planted
    assert "vendor/lib" not in git(repo, "ls-files", "--stage")  # the gitlink stayed held

    # The person sees every held path with its reason.
    listed = cli("changes", "--workspace", str(repo), "--json", home=isolated_home)
    assert listed.returncode == 0, listed.stderr
    pending = json.loads(listed.stdout)["pending"][session.id]
    reasons = {p["path"]: p["reason"] for p in pending}
    assert "commondir" in reasons[".git/commondir"]
    assert "info/attributes" in reasons[".git/info/attributes"]
    assert "modules" in reasons[".git/modules/sub/config"]
    assert "core.hooksPath" in reasons[".husky/_/pre-commit"]
    assert "new git repository" in reasons["vendor/lib/.git/config"]
    assert "gitlink vendor/lib" in reasons[".git/index"]
    assert ".envrc" in reasons["deep/.envrc"]

    # The user's own git runs nothing planted.
    subprocess.run([GIT, "-C", str(repo), "status"], check=True, capture_output=True)
    git(repo, "add", "notes.txt")
    subprocess.run(
        [GIT, "-C", str(repo), "commit", "-q", "-m", "user"], check=True, capture_output=True
    )
    assert not marker.exists()

    # One undo restores the deleted folder (and reverts the other edits of that call).
    gateway.close_session(session)
    undone = cli("undo", "--workspace", str(repo), "--json", home=isolated_home)
    assert json.loads(undone.stdout)["restored"], undone.stdout + undone.stderr
    assert (repo / "src" / "app.py").read_text() == "print('app')\n"
    assert (repo / "src" / "util.py").read_text() == "X = 1\n"
    assert not (repo / "src" / "new.py").exists()


def test_the_planted_hooks_would_run_without_the_hold(repo, tmp_path):
    """Control: the probes are real — applied directly, git runs the planted code."""
    marker = tmp_path / "PLANTED-CODE-RAN"
    git(repo, "config", "core.hooksPath", ".husky/_")
    (repo / ".husky" / "_").mkdir(parents=True)
    hook = repo / ".husky" / "_" / "pre-commit"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    git(repo, "commit", "-q", "--allow-empty", "-m", "x")
    assert marker.exists()


def test_the_planted_repository_runs_code_when_applied_directly(repo, tmp_path):
    """Control: in direct mode (no changeset) the same session plants code that the
    user's own `git status` then runs — the probe is real."""
    marker = tmp_path / "PLANTED-CODE-RAN"
    gateway = make_gateway(repo, tmp_path, mode="direct")
    try:
        session = gateway.open_session(agent="attacker", toolsets=["all"])
        script = ATTACK.replace("{marker}", str(marker)).replace(
            'echo "../../tmp/elsewhere" > .git/commondir\n', ""
        )
        output = agent_runs(gateway, session, script)
        assert "[exit 0" in output, output
    finally:
        gateway.close()
    subprocess.run([GIT, "-C", str(repo), "status"], check=True, capture_output=True)
    assert marker.exists()
