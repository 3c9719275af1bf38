"""`agentvisor run`: the harness sees the workspace through a changeset (issues 14, 18).

The "harness" is a plain shell script run by the real CLI in a real bwrap sandbox: it
edits a file, plants a nested repository with a pre-commit hook and deletes a folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.changes.conftest import GIT, cli, git
from tests.conftest import AGENTVISOR, is_root, requires_bwrap

pytestmark = requires_bwrap

HARNESS = r"""
set -e
echo "edited by the harness" >> README.md
rm -rf src
mkdir -p vendor/lib && cd vendor/lib && git init -q && cd ../..
printf '#!/bin/sh\ntouch {marker}\n' > vendor/lib/.git/hooks/pre-commit
chmod +x vendor/lib/.git/hooks/pre-commit
echo 'touch {marker}' > .envrc
"""


def run_harness(
    repo: Path, home: Path, config: Path, script: str
) -> subprocess.CompletedProcess[str]:
    return cli(
        "run",
        "--config",
        str(config),
        "--workspace",
        str(repo),
        "--",
        "bash",
        "-c",
        script,
        home=home,
    )


def config_file(tmp_path: Path, mode: str | None = None) -> Path:
    path = tmp_path / "operator.yaml"
    path.write_text(f"workspace: {{mode: {mode}}}\n" if mode else "{}\n")
    return path


def commit_in_nested_repo(repo: Path, home: Path) -> None:
    """What the user does later: commit in the nested repository (its hook would run)."""
    subprocess.run(
        [GIT, "-C", str(repo / "vendor" / "lib"), "commit", "-q", "--allow-empty", "-m", "u"],
        check=True,
        capture_output=True,
        env=dict(os.environ, HOME=str(home)),
    )


def test_run_applies_ordinary_edits_and_holds_the_host_run_class(repo, isolated_home, tmp_path):
    marker = tmp_path / "PLANTED-CODE-RAN"
    done = run_harness(
        repo, isolated_home, config_file(tmp_path), HARNESS.replace("{marker}", str(marker))
    )
    assert done.returncode == 0, done.stderr
    # Ordinary edits and the deletion are in the real workspace once the run ends.
    assert (repo / "README.md").read_text() == "# project\nedited by the harness\n"
    assert not (repo / "src").exists()
    # The planted repository and .envrc are not.
    assert not (repo / "vendor" / "lib" / ".git").exists()
    assert not (repo / ".envrc").exists()
    # One line says what was applied and what waits, and how to review.
    line = done.stderr.strip().splitlines()[-1]
    assert "applied" in line and "2 held for a person" in line, line
    assert "agentvisor changes" in line, line

    listed = cli("changes", "--workspace", str(repo), "--json", home=isolated_home)
    assert listed.returncode == 0, listed.stderr
    pending = json.loads(listed.stdout)["pending"]
    (run_id,) = pending
    assert run_id.startswith("run-") and run_id in line
    reasons = {p["path"]: p["reason"] for p in pending[run_id]}
    assert "new git repository in vendor/lib" in reasons["vendor/lib/.git/hooks/pre-commit"]
    assert ".envrc" in reasons[".envrc"]
    assert not marker.exists()
    # The applies and the hold are audit events of the run's session, with hashes.
    from agentvisor.config import load_config
    from agentvisor.state import State

    events = State.from_config(load_config(str(tmp_path / "operator.yaml"))).audit.events()
    ours = [e for e in events if e.kind == "changes" and e.session == run_id]
    assert {"apply", "hold"} <= {e.decision for e in ours}, ours
    applied_paths = [p for e in ours if e.decision == "apply" for p in e.arguments["paths"]]
    assert any(p["path"] == "README.md" and p["sha256"] for p in applied_paths)

    # The user's own git (in the folder the harness made) runs nothing planted.
    git(repo, "status")
    commit_in_nested_repo(repo, isolated_home)
    assert not marker.exists()

    # `agentvisor undo` restores the deleted folder (once per changeset the run applied:
    # a settle while the harness ran may have made more than one).
    applied = [a for a in json.loads(listed.stdout)["applied"] if a["session"] == run_id]
    assert applied
    for _ in applied:
        undone = cli("undo", "--workspace", str(repo), "--json", home=isolated_home)
        assert undone.returncode == 0, undone.stdout + undone.stderr
    assert (repo / "src" / "app.py").read_text() == "print('app')\n"
    assert (repo / "README.md").read_text() == "# project\n"


def test_direct_mode_writes_straight_into_the_workspace(repo, isolated_home, tmp_path):
    """Control: with workspace.mode: direct (today's behaviour) the same harness plants a
    hook that the user's commit then runs — the probe is real."""
    marker = tmp_path / "PLANTED-CODE-RAN"
    done = run_harness(
        repo,
        isolated_home,
        config_file(tmp_path, "direct"),
        # .envrc stays read-only in direct mode (a protection of its own)
        HARNESS.replace("echo 'touch {marker}' > .envrc", "").replace("{marker}", str(marker)),
    )
    assert done.returncode == 0, done.stderr
    assert "held" not in done.stderr
    assert (repo / "README.md").read_text() == "# project\nedited by the harness\n"
    assert (repo / "vendor" / "lib" / ".git" / "hooks" / "pre-commit").exists()
    listed = cli("changes", "--workspace", str(repo), "--json", home=isolated_home)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert json.loads(listed.stdout) | {"workspace": None} == {
        "workspace": None,
        "resumed": [],
        "pending": {},
        "applied": [],
    }
    commit_in_nested_repo(repo, isolated_home)
    assert marker.exists()


def test_review_mode_applies_nothing(repo, isolated_home, tmp_path):
    done = run_harness(
        repo, isolated_home, config_file(tmp_path, "review"), "echo more >> README.md"
    )
    assert done.returncode == 0, done.stderr
    assert (repo / "README.md").read_text() == "# project\n"
    assert "1 held for a person (README.md" in done.stderr
    listed = cli("changes", "--workspace", str(repo), "--json", home=isolated_home)
    (items,) = json.loads(listed.stdout)["pending"].values()
    assert items[0]["path"] == "README.md" and "review" in items[0]["reason"]


def run_in_steps(
    repo: Path, home: Path, config: Path, first: str, then: str, appears: Path
) -> tuple[int, str, str]:
    """Run a harness that does ``first``, waits on its input, then does ``then``: the
    test lets it go on once ``appears`` is in the real workspace (a settle while the
    harness runs put it there). The exit code, stdout and stderr."""
    script = f"{first}; read line; {then}"
    argv = ["run", "--config", str(config), "--workspace", str(repo), "--", "bash", "-c", script]
    harness = subprocess.Popen(
        [AGENTVISOR, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, HOME=str(home)),
        cwd=home,
    )
    try:
        deadline = time.monotonic() + 60
        while not appears.exists() and time.monotonic() < deadline:
            assert harness.poll() is None, harness.communicate()
            time.sleep(0.1)
        assert appears.exists(), f"{appears} was not applied while the harness ran"
        out, err = harness.communicate("go\n", timeout=60)
    finally:
        harness.kill()
        harness.wait()
    return harness.returncode, out, err


def test_edits_are_applied_while_the_harness_runs(repo, isolated_home, tmp_path):
    """auto mode settles every few seconds, not only at exit: the first edit reaches
    the workspace while the harness still waits on its input; the last one at exit."""
    code, _, err = run_in_steps(
        repo,
        isolated_home,
        config_file(tmp_path),
        "echo one > first.txt",
        "echo two > last.txt",
        appears=repo / "first.txt",
    )
    assert code == 0, err
    assert (repo / "first.txt").read_text() == "one\n"
    assert (repo / "last.txt").read_text() == "two\n"
    assert "held" not in err


def test_a_backend_without_changesets_refuses_a_chosen_mode(repo, isolated_home, tmp_path):
    config = tmp_path / "operator.yaml"
    config.write_text("workspace: {mode: auto}\nsandbox: {backend: local}\n")
    done = run_harness(repo, isolated_home, config, "echo x > x.txt")
    assert done.returncode != 0
    assert "workspace.mode auto needs the bwrap sandbox (the backend is local)" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (repo / "x.txt").exists()


@pytest.mark.skipif(
    not (is_root and os.path.exists("/dev/loop-control")),
    reason="the changeset's image is loop-mounted: needs root and loop devices",
)
def test_sandbox_disk_mb_bounds_what_the_harness_writes(repo, isolated_home, tmp_path):
    """The run's changeset lives on a size-limited image, as a gateway session's does
    (40 MiB: the scratch tmpfs take half, the changeset holds the other 20 MiB)."""
    config = tmp_path / "operator.yaml"
    config.write_text("sandbox: {disk_mb: 40}\n")
    try:
        # Control: under the quota the write succeeds and reaches the workspace.
        code, out, err = run_in_steps(
            repo,
            isolated_home,
            config,
            "head -c 4M /dev/zero > small.bin",
            "head -c 30M /dev/zero > big.bin && echo big-written; true",
            appears=repo / "small.bin",
        )
        assert code == 0, err
        assert (repo / "small.bin").stat().st_size == 4 * 2**20
        assert "big-written" not in out
        assert "No space left on device" in err
        assert not (repo / "big.bin").exists()
        listed = cli("changes", "--workspace", str(repo), "--json", home=isolated_home)
        (items,) = json.loads(listed.stdout)["pending"].values()
        assert any("sandbox.disk_mb reached" in (p["reason"] or "") for p in items), items
    finally:
        cli("discard", "--workspace", str(repo), home=isolated_home)  # the image goes too
