"""Changesets on the hard cases, against real overlay mounts (the session's sandbox)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

import pytest

from agentvisor.changes import Changesets
from agentvisor.state.events import SQLiteAuditLog
from tests.changes.conftest import agent_runs, cli, make_gateway
from tests.conftest import requires_bwrap

pytestmark = requires_bwrap


def test_renames_and_opaque_directories_apply_and_undo(gateway, repo):
    session = gateway.open_session(toolsets=["all"])
    agent_runs(gateway, session, "mv src lib\nrm -rf lib && mkdir lib && echo v2 > lib/only.py\n")
    assert sorted(os.listdir(repo / "lib")) == ["only.py"]
    assert not (repo / "src").exists()
    gateway.changesets.undo()
    assert sorted(os.listdir(repo / "src")) == ["app.py", "util.py"]
    assert not (repo / "lib").exists()


def test_an_opaque_directory_deletes_what_it_hides(gateway, repo):
    session = gateway.open_session(toolsets=["all"])
    agent_runs(gateway, session, "rm -rf src && mkdir src && echo fresh > src/fresh.py\n")
    assert sorted(os.listdir(repo / "src")) == ["fresh.py"]


def test_modes_and_symlinks_are_applied_as_such(gateway, repo, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    session = gateway.open_session(toolsets=["all"])
    agent_runs(gateway, session, f"chmod 755 src/app.py\nln -s {outside} link\n")
    assert os.stat(repo / "src" / "app.py").st_mode & 0o777 == 0o755
    assert os.readlink(repo / "link") == str(outside)
    # The link is in the workspace now; a later change below that name is applied to a
    # directory that replaces it, never through it.
    agent_runs(gateway, session, "rm link && mkdir link && echo x > link/planted\n")
    assert os.listdir(outside) == []
    assert (repo / "link").is_dir() and not (repo / "link").is_symlink()


def test_a_symlinked_parent_in_the_workspace_stops_the_apply(repo, tmp_path):
    """Control for the above: applying through a link would have written outside."""
    outside = tmp_path / "outside"
    outside.mkdir()
    changesets = Changesets(repo, root=tmp_path / "state")
    session = changesets.start("s-1")
    (session.upper / "dir").mkdir()
    (session.upper / "dir" / "f").write_text("x")
    os.symlink(outside, repo / "dir")  # a person's link, made while the session ran
    result = changesets.apply(session, ["dir/f"], force=True)
    assert result.applied is not None
    errors = [e.error for e in result.applied.entries if e.error]
    assert errors and "symbolic link" in errors[0]
    assert os.listdir(outside) == []


def test_large_binary_files_are_streamed_and_hashed(gateway, repo):
    session = gateway.open_session(toolsets=["all"])
    agent_runs(gateway, session, "head -c 30000000 /dev/urandom > blob.bin\n")
    data = (repo / "blob.bin").read_bytes()
    assert len(data) == 30_000_000
    events = [e for e in gateway.audit.events() if e.kind == "changes" and e.decision == "apply"]
    hashes = {p["path"]: p["sha256"] for e in events for p in e.arguments["paths"]}
    assert hashes["blob.bin"] == hashlib.sha256(data).hexdigest()


def test_a_path_the_user_changed_is_held_as_a_conflict(gateway, repo):
    session = gateway.open_session(toolsets=["all"])
    agent_runs(gateway, session, "true\n")
    time.sleep(0.02)  # past the coarse clock tick of the session's start
    (repo / "README.md").write_text("the user's edit\n")
    output = agent_runs(gateway, session, "echo agent >> README.md\n")
    assert "conflict" in output
    assert (repo / "README.md").read_text() == "the user's edit\n"
    pending = gateway.changesets.pending(session.changeset)
    assert [p.path for p in pending if p.conflict] == ["README.md"]


def test_two_sessions_on_one_workspace(repo, tmp_path):
    gateway = make_gateway(repo, tmp_path)
    try:
        first = gateway.open_session(toolsets=["all"])
        second = gateway.open_session(toolsets=["all"])
        agent_runs(gateway, second, "true\n")
        time.sleep(0.02)
        agent_runs(gateway, first, "echo one > shared.txt\n")
        assert (repo / "shared.txt").read_text() == "one\n"
        agent_runs(gateway, second, "echo two > shared.txt\n")
        assert (repo / "shared.txt").read_text() == "one\n"  # not silently overwritten
        held = gateway.changesets.pending(second.changeset)
        assert any(p.path == "shared.txt" and p.conflict for p in held)
    finally:
        gateway.close()


def test_review_mode_applies_nothing_until_a_person_does(repo, tmp_path, isolated_home):
    gateway = make_gateway(repo, tmp_path, mode="review")
    try:
        session = gateway.open_session(toolsets=["all"])
        out = gateway.call(session, "write_file", {"path": "new.txt", "content": "hi\n"})
        assert not out.is_error
        # The agent sees its write (file tools and commands share one view) ...
        seen = gateway.call(session, "terminal", {"command": "cat new.txt"})
        assert "hi" in seen.text
        # ... the real workspace does not, until a person applies it.
        assert not (repo / "new.txt").exists()
        diff = cli("diff", "--workspace", str(repo), home=isolated_home)
        assert "+hi" in diff.stdout, diff.stderr
        applied = cli("apply", "--workspace", str(repo), "new.txt", home=isolated_home)
        assert applied.returncode == 0, applied.stdout + applied.stderr
        assert (repo / "new.txt").read_text() == "hi\n"
    finally:
        gateway.close()


def test_discard_drops_pending_changes(repo, tmp_path, isolated_home):
    gateway = make_gateway(repo, tmp_path, mode="review")
    try:
        session = gateway.open_session(toolsets=["all"])
        gateway.call(session, "write_file", {"path": "junk.txt", "content": "x"})
        out = cli("discard", "--workspace", str(repo), "--json", home=isolated_home)
        assert [p["path"] for p in json.loads(out.stdout)] == ["junk.txt"]
        assert gateway.changesets.pending(session.changeset) == []
        assert not (repo / "junk.txt").exists()
    finally:
        gateway.close()


def test_no_stand_in_files_reach_the_real_workspace(workspace, tmp_path):
    gateway = make_gateway(workspace, tmp_path)
    try:
        session = gateway.open_session(toolsets=["all"])
        out = gateway.call(session, "terminal", {"command": "ls -A; git status 2>&1 | head -1"})
        assert out.text.startswith("fatal: not a git repository") or ".git" not in out.text
        assert os.listdir(workspace) == []
    finally:
        gateway.close()
    assert os.listdir(workspace) == []
    assert gateway.changesets.sessions() == []  # nothing pending: the changeset is gone


def test_paths_protected_today_stay_read_only_in_the_view(gateway, repo):
    session = gateway.open_session(toolsets=["all"])
    out = agent_runs(gateway, session, "echo x > .git/hooks/pre-commit || echo REFUSED\n")
    assert "REFUSED" in out and "Read-only" in out
    control = agent_runs(gateway, session, "echo x > .git/description && echo WROTE\n")
    assert "WROTE" in control


def test_undo_data_is_bounded(repo, tmp_path, isolated_home):
    gateway = make_gateway(repo, tmp_path, undo_mb=0)
    try:
        session = gateway.open_session(toolsets=["all"])
        agent_runs(gateway, session, "rm -rf src\n")
        assert not (repo / "src").exists()
        listed = cli("changes", "--workspace", str(repo), home=isolated_home)
        assert "undo data dropped (workspace.undo_mb)" in listed.stdout
        undone = cli("undo", "--workspace", str(repo), home=isolated_home)
        assert undone.returncode != 0 and "workspace.undo_mb" in undone.stderr
    finally:
        gateway.close()


KILL_MID_APPLY = """
import importlib, os, sys
import pytest

from agentvisor.changes import Changesets
from agentvisor.state.events import SQLiteAuditLog
apply_module = importlib.import_module("agentvisor.changes.apply")
calls = []
real = apply_module._place
def dying(parent, name, make, tmp):
    calls.append(1)
    if len(calls) == 2:
        make(tmp)
        os._exit(9)  # the gateway is killed with the second path half made
    return real(parent, name, make, tmp)
apply_module._place = dying
changesets = Changesets(sys.argv[1])
session = changesets.session("s-kill")
changesets.apply(session)
"""


def test_an_apply_killed_midway_is_finished_later(repo, tmp_path, isolated_home):
    changesets = Changesets(repo)
    session = changesets.start("s-kill")
    for name in ("a.txt", "b.txt", "c.txt"):
        (session.upper / name).write_text(name * 1000)
    env = dict(os.environ, HOME=str(isolated_home))
    died = subprocess.run([sys.executable, "-c", KILL_MID_APPLY, str(repo)], env=env)
    assert died.returncode == 9
    assert (repo / "a.txt").exists() and not (repo / "b.txt").exists()
    assert [n for n in os.listdir(repo) if n.startswith(".agentvisor-apply-")]  # half made
    listed = cli("changes", "--workspace", str(repo), home=isolated_home)
    assert "interrupted apply" in listed.stdout, listed.stdout + listed.stderr
    for name in ("a.txt", "b.txt", "c.txt"):
        assert (repo / name).read_text() == name * 1000
    assert not [n for n in os.listdir(repo) if n.startswith(".agentvisor-apply-")]


def test_direct_mode_keeps_todays_behaviour(repo, tmp_path):
    gateway = make_gateway(repo, tmp_path, mode="direct")
    assert gateway.changesets is None
    try:
        session = gateway.open_session(toolsets=["all"])
        gateway.call(session, "write_file", {"path": "d.txt", "content": "d"})
        assert (repo / "d.txt").read_text() == "d"
        assert session.changeset is None
    finally:
        gateway.close()


def test_the_agent_cannot_reach_its_changeset_or_apply_it(gateway, repo):
    """The store is below agentvisor's state directory, which no sandbox mounts."""
    session = gateway.open_session(toolsets=["all"])
    gateway.call(session, "write_file", {"path": ".envrc", "content": "echo hi"})
    store = str(gateway.changesets.store.root)
    probe = f"ls {store} 2>&1; ls {store}/sessions/{session.id}/upper 2>&1 || echo UNREACHABLE\n"
    out = agent_runs(gateway, session, probe)
    assert "UNREACHABLE" in out
    assert os.path.isdir(store)  # control: the store exists on the host
    assert not (repo / ".envrc").exists()


def test_apply_discard_and_undo_are_audited_and_verified(repo, tmp_path, isolated_home):
    gateway = make_gateway(repo, tmp_path, mode="review")
    try:
        session = gateway.open_session(toolsets=["all"])
        gateway.call(session, "write_file", {"path": "a.txt", "content": "a"})
        gateway.call(session, "write_file", {"path": "b.txt", "content": "b"})
    finally:
        gateway.close()
    ws = ["--workspace", str(repo)]
    assert cli("apply", *ws, "a.txt", home=isolated_home).returncode == 0
    assert cli("discard", *ws, "b.txt", home=isolated_home).returncode == 0
    assert cli("undo", *ws, home=isolated_home).returncode == 0
    shown = cli("log", "--kind", "changes", "--json", home=isolated_home)
    events = [json.loads(line) for line in shown.stdout.splitlines()]
    assert [e["decision"] for e in events] == ["apply", "discard", "undo"]
    applied = events[0]["arguments"]["paths"][0]
    assert applied["path"] == "a.txt"
    assert applied["sha256"] == hashlib.sha256(b"a").hexdigest()
    verified = cli("log", "verify", home=isolated_home)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_restarted_sandbox_mounts_the_same_changeset_again(repo, tmp_path):
    gateway = make_gateway(repo, tmp_path, mode="review")
    try:
        session = gateway.open_session(toolsets=["all"])
        gateway.call(session, "write_file", {"path": "kept.txt", "content": "kept\n"})
        session._persistent.close()  # the sandbox ended (crash, idle, a kill)
        out = gateway.call(session, "terminal", {"command": "cat kept.txt"})
        assert "kept" in out.text, out.text
        assert gateway.call(session, "read_file", {"path": "kept.txt"}).text.endswith("kept")
        assert not (repo / "kept.txt").exists()
    finally:
        gateway.close()


def test_a_backend_without_changesets_refuses_a_chosen_mode(repo, tmp_path):
    from agentvisor.config import config_from_dict
    from agentvisor.errors import ConfigError
    from agentvisor.gateway import Gateway

    chosen = config_from_dict({"sandbox": {"persistent": False}, "workspace": {"mode": "auto"}})
    with pytest.raises(ConfigError, match=r"workspace\.mode auto needs the persistent bwrap"):
        Gateway(chosen, workspace=repo, audit=SQLiteAuditLog(tmp_path / "a.db"))
    default = config_from_dict({"sandbox": {"persistent": False}})
    gateway = Gateway(default, workspace=repo, audit=SQLiteAuditLog(tmp_path / "b.db"))
    try:
        assert gateway.changesets is None
        assert any("land directly" in w for w in gateway.sandbox.warnings)
    finally:
        gateway.close()


def test_an_ended_sessions_changeset_goes_once_nothing_waits(repo, tmp_path, isolated_home):
    gateway = make_gateway(repo, tmp_path)
    session = gateway.open_session(toolsets=["all"])
    agent_runs(gateway, session, "echo 'use nix' > .envrc\n")
    store = gateway.changesets.store.session(session.id)
    assert store.live
    gateway.close()
    assert not store.live and store.exists  # ended, but the .envrc still waits
    applied = cli("apply", "--workspace", str(repo), home=isolated_home)
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert (repo / ".envrc").read_text() == "use nix\n"
    assert not store.exists


def test_workspace_hold_globs_are_held(repo, tmp_path):
    gateway = make_gateway(repo, tmp_path, hold=["deploy/*.toml"])
    try:
        session = gateway.open_session(toolsets=["all"])
        out = agent_runs(gateway, session, "mkdir -p deploy && echo x > deploy/prod.toml\n")
        assert "workspace.hold" in out
        assert not (repo / "deploy" / "prod.toml").exists()
        agent_runs(gateway, session, "echo y > deploy/notes.md\n")  # control: not matched
        assert (repo / "deploy" / "notes.md").exists()
    finally:
        gateway.close()


def test_undo_leaves_a_path_changed_again_since(gateway, repo):
    session = gateway.open_session(toolsets=["all"])
    agent_runs(gateway, session, "echo agent > README.md\n")
    (repo / "README.md").write_text("the user's later edit\n")
    result = gateway.changesets.undo()
    assert [p for p, _ in result.skipped] == ["README.md"]
    assert (repo / "README.md").read_text() == "the user's later edit\n"


def test_review_shows_hostile_names_and_contents_as_text(repo, tmp_path, isolated_home):
    """File names and contents are the agent's: `changes` and `diff` write a terminal's
    control characters out (a name or a line could set the clipboard or rewrite the screen
    of the person reviewing), and keep the diff's own newlines."""
    gateway = make_gateway(repo, tmp_path, mode="review")
    name = "x\x1b]52;c;cm0gLXJm\x07.txt"
    try:
        session = gateway.open_session(toolsets=["all"])
        out = gateway.call(session, "write_file", {"path": name, "content": "a\x1b[2Jb\n"})
        assert not out.is_error, out.text
        listing = cli("changes", "--workspace", str(repo), home=isolated_home).stdout
        diff = cli("diff", "--workspace", str(repo), home=isolated_home).stdout
        for shown in (listing, diff):
            assert "\x1b" not in shown and "\x07" not in shown, repr(shown)
        assert "x\\x1b]52;c;cm0gLXJm\\x07.txt" in listing
        assert "+a\\x1b[2Jb\n" in diff
        # Control: the pending change holds the raw name (--json keeps it).
        raw = cli("changes", "--workspace", str(repo), "--json", home=isolated_home).stdout
        assert "\\u001b]52" in raw
    finally:
        gateway.close()
