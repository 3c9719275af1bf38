"""More ways into the user's own git after a session (held-out style variants of issue 14):
files that a repository's config includes from the work tree, and the configs of hook
managers that the installed git hooks run. Each is judged by its effect: does the user's
real git, run after the session, run anything planted?"""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.changes.conftest import GIT, agent_runs, git
from tests.conftest import requires_bwrap

pytestmark = requires_bwrap

FSMONITOR = "printf '[core]\\n\\tfsmonitor = \"touch {marker}; false\"\\n' > {target}\n"


def user_works(repo, home) -> None:
    """What a user does next: look at the repository and commit."""
    env = dict(os.environ, HOME=str(home))
    for args in (["status"], ["add", "-A"], ["commit", "-q", "-m", "after the session"]):
        subprocess.run([GIT, "-C", str(repo), *args], env=env, capture_output=True)


@pytest.mark.parametrize(
    "setup, target",
    [
        ("include.path", ".gitconfig-shared"),  # the project shares config from its tree
        ("includeIf.gitdir:**/.path", "config/git.inc"),
        ("include.path", "../.gitconfig-shared"),  # relative to .git, as the user wrote it
    ],
)
def test_a_config_file_included_from_the_work_tree_is_held(
    gateway, repo, isolated_home, tmp_path, setup, target
):
    path = target if target.startswith("../") else f"../{target}"
    git(repo, "config", setup, path)
    in_tree = os.path.normpath(os.path.join(".git", path))
    (repo / in_tree).parent.mkdir(parents=True, exist_ok=True)
    (repo / in_tree).write_text("[user]\n\tname = T\n")
    user_works(repo, isolated_home)  # control: the user's git works with the include
    marker = tmp_path / "PLANTED-CODE-RAN"
    session = gateway.open_session(agent="attacker", toolsets=["all"])
    script = FSMONITOR.format(marker=marker, target=in_tree) + "echo ordinary > notes.txt\n"
    output = agent_runs(gateway, session, script)
    assert "[exit 0" in output, output
    assert (repo / "notes.txt").read_text() == "ordinary\n"  # control: edits apply
    assert "fsmonitor" not in (repo / in_tree).read_text()
    user_works(repo, isolated_home)
    assert not marker.exists()


@pytest.mark.parametrize(
    "name, content",
    [
        (
            ".pre-commit-config.yaml",
            "repos:\n- repo: local\n  hooks:\n  - id: x\n    name: x\n    entry: touch {marker}\n"
            "    language: system\n    always_run: true\n    pass_filenames: false\n",
        ),
        ("lefthook.yml", "pre-commit:\n  commands:\n    x:\n      run: touch {marker}\n"),
        (".husky/pre-commit", "touch {marker}\n"),
    ],
)
def test_a_hook_managers_config_is_held(gateway, repo, tmp_path, name, content):
    marker = tmp_path / "PLANTED-CODE-RAN"
    session = gateway.open_session(agent="attacker", toolsets=["all"])
    body = content.format(marker=marker)
    script = f"mkdir -p $(dirname {name})\ncat > {name} <<'X'\n{body}X\necho ordinary > notes.txt\n"
    output = agent_runs(gateway, session, script)
    assert "[exit 0" in output, output
    assert (repo / "notes.txt").read_text() == "ordinary\n"
    assert not (repo / name).exists(), f"{name} was applied to the real workspace"
