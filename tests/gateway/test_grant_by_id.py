"""Issue 16: a grant by id. A refusal whose words would need awkward quoting names an id;
`agentvisor grant --ask ID` shows the person exactly what it stands for, asks on a
terminal, and grants that request for its session, once. Real gateway pipeline, real CLI
runs against the same state database."""

from __future__ import annotations

import os
import pty
import re
import sqlite3
import subprocess
import time

import pytest

from tests.conftest import AGENTVISOR, run_cli
from tests.gateway.test_pipeline import make_gateway, scripted

AWKWARD = 'git push --force origin "it\'s"'  # the grant's words would nest quotes
CLEAN = "git push --force origin main"
HIDDEN = "git push --force origin main\x1b[2K\r\u202eniam"  # escapes and a bidi override


@pytest.fixture
def setup(workspace, tmp_path, isolated_home):
    backend = scripted({AWKWARD: b"pushed\n", CLEAN: b"pushed\n", HIDDEN: b"pushed\n"})
    gateway = make_gateway(workspace, tmp_path, backend=backend)  # unattended: asks refused
    config = tmp_path / "config.yaml"
    config.write_text(f"audit:\n  url: sqlite:///{tmp_path / 'audit.db'}\n")
    env = dict(os.environ, HOME=str(isolated_home))
    try:
        yield gateway, config, env
    finally:
        gateway.close()


def refused_id(gateway, session, command):
    out = gateway.call(session, "terminal", {"command": command})
    assert out.is_error and out.text.startswith("Refused"), out.text
    found = re.search(r"`agentvisor grant --ask (c-[0-9a-f]{12}) --for 30m`", out.text)
    return found.group(1) if found else None


def grant(config, env, *args, **kw):
    return run_cli("grant", *args, "--config", str(config), env=env, **kw)


def test_an_awkward_refusal_names_an_id_a_clean_one_its_words(setup):
    gateway, _, _ = setup
    session = gateway.open_session(toolsets=["all"])
    refusal = refused_id(gateway, session, AWKWARD)
    assert refusal is not None
    call = [e for e in gateway.audit.events(session=session.id) if e.kind == "call"][-1]
    assert call.decision == "deny" and call.ref == refusal  # the id is in the audit log
    # Control: words that quote cleanly are given as words, as before.
    out = gateway.call(session, "terminal", {"command": CLEAN})
    assert "agentvisor grant exec --for 30m -- git push --force origin main" in out.text
    assert "--ask" not in out.text


def test_grant_by_id_shows_what_it_grants_and_allows_that_request_in_its_session(setup):
    gateway, config, env = setup
    session = gateway.open_session(toolsets=["all"])
    refusal = refused_id(gateway, session, AWKWARD)
    # Without a terminal and without --yes nothing is granted, but the person sees what.
    r = grant(config, env, "--ask", refusal, "--for", "30m")
    assert r.returncode == 1 and "not on a terminal" in r.stderr
    assert f"exec: {AWKWARD}\n" in r.stdout  # the request as the agent sent it
    assert "git push --force origin 'it'\"'\"'s'" in r.stdout  # the pattern it would add
    assert f"session {session.id}" in r.stdout
    assert "no grants" in run_cli("grants", "--config", str(config), env=env).stdout
    assert gateway.call(session, "terminal", {"command": AWKWARD}).is_error

    r = grant(config, env, "--ask", refusal, "--for", "30m", "--yes")
    assert r.returncode == 0, r.stderr
    assert f"for session {session.id}" in r.stdout
    out = gateway.call(session, "terminal", {"command": AWKWARD})
    assert not out.is_error and "pushed" in out.text
    # Bound to the refused request's session: another session is still refused.
    other = gateway.open_session(toolsets=["all"])
    assert gateway.call(other, "terminal", {"command": AWKWARD}).is_error
    # An id grants once.
    r = grant(config, env, "--ask", refusal, "--yes")
    assert r.returncode == 2 and "already granted" in r.stderr


def test_what_the_id_stands_for_is_shown_character_for_character(setup):
    gateway, config, env = setup
    session = gateway.open_session(toolsets=["all"])
    refusal = refused_id(gateway, session, HIDDEN)
    assert refusal is not None  # control characters make it awkward
    r = grant(config, env, "--ask", refusal)
    assert r.returncode == 1
    assert "\x1b" not in r.stdout and "\r" not in r.stdout and "\u202e" not in r.stdout
    assert "main\\x1b[2K\\r\\u202eniam" in r.stdout and "written as escapes" in r.stdout


@pytest.mark.parametrize(
    "change, error",
    [
        (None, "no refused request has the id"),
        ("UPDATE refusals SET expires_at = 1", "expired at"),
        ("UPDATE refusals SET user = 'mallory'", "user 'mallory'"),
    ],
)
def test_unknown_expired_and_other_users_ids_are_clear_errors(setup, tmp_path, change, error):
    gateway, config, env = setup
    session = gateway.open_session(toolsets=["all"])
    refusal = refused_id(gateway, session, AWKWARD)
    if change is None:
        refusal = "c-000000000000"
    else:
        with sqlite3.connect(tmp_path / "audit.db") as db:
            db.execute(change)
    r = grant(config, env, "--ask", refusal, "--yes")
    assert r.returncode == 2 and error in r.stderr and "Traceback" not in r.stderr
    assert "no grants" in run_cli("grants", "--config", str(config), env=env).stdout


def test_with_an_id_no_pattern_or_session_can_be_slipped_in(setup):
    gateway, config, env = setup
    refusal = refused_id(gateway, gateway.open_session(toolsets=["all"]), AWKWARD)
    for extra in (["exec", "rm -rf /"], ["--session", "s-other"]):
        r = grant(config, env, *extra, "--ask", refusal, "--yes")
        assert r.returncode == 2 and "give no KIND, PATTERN or --session" in r.stderr


def answer_on_a_terminal(config, env, refusal, typed):
    """`grant --ask` on a real pseudo-terminal, the person typing ``typed``."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [AGENTVISOR, "grant", "--ask", refusal, "--config", str(config)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    seen = b""
    deadline = time.monotonic() + 60
    while b"Grant it? [y/N]" not in seen and time.monotonic() < deadline:
        seen += os.read(leader, 4096)
    os.write(leader, typed.encode() + b"\n")
    proc.wait(timeout=60)
    try:
        while chunk := os.read(leader, 4096):
            seen += chunk
    except OSError:  # the terminal closed with the process
        pass
    os.close(leader)
    return proc.returncode, seen.decode()


def test_on_a_terminal_the_person_confirms(setup):
    gateway, config, env = setup
    session = gateway.open_session(toolsets=["all"])
    refusal = refused_id(gateway, session, AWKWARD)
    code, shown = answer_on_a_terminal(config, env, refusal, "n")
    assert code == 1 and "not granted" in shown
    assert gateway.call(session, "terminal", {"command": AWKWARD}).is_error
    code, shown = answer_on_a_terminal(config, env, refusal, "y")
    assert code == 0 and f"for session {session.id}" in shown, shown
    assert not gateway.call(session, "terminal", {"command": AWKWARD}).is_error


def test_refusals_a_day_past_their_expiry_are_dropped(tmp_path):
    from agentvisor.state.db import database
    from agentvisor.state.refusals import RefusalStore

    store = RefusalStore(database(tmp_path / "state.db"))
    old = store.record("exec", "x", ("x",), "why", "default:exec")
    kept = store.record("exec", "y", ("y",), "why", "default:exec")
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute("UPDATE refusals SET expires_at = 1 WHERE id = ?", (old.id,))
        db.execute("UPDATE refusals SET expires_at = ? WHERE id = ?", (time.time() - 60, kept.id))
    store.record("exec", "z", ("z",), "why", "default:exec")
    assert store.get(old.id) is None  # long expired: forgotten
    assert store.get(kept.id) is not None  # just expired: still says "expired"


def test_an_exec_refusal_names_an_id_too(tmp_path):
    """`agentvisor exec` refuses on the person's own terminal; its awkward hint names an
    id the same way, and the grant (for every session: exec has none) lets it pass."""
    import json

    env = dict(os.environ, HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"))
    words = ["sh", "-c", AWKWARD]
    r = subprocess.run(
        [AGENTVISOR, "exec", "--", *words],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )
    found = re.search(r"agentvisor grant --ask (c-[0-9a-f]{12}) --for 30m", r.stderr)
    assert r.returncode != 0 and found, r.stderr
    granted = run_cli("grant", "--ask", found.group(1), "--yes", env=env, cwd=tmp_path)
    assert granted.returncode == 0 and "every session" in granted.stdout, granted.stdout
    after = json.loads(run_cli("check", "exec", "--", *words, env=env, cwd=tmp_path).stdout)
    assert after["decision"] == "allow" and after["rule"].startswith("grant:"), after
