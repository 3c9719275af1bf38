"""Scoped grants: stored in SQLite, bound to a session, expiring by themselves."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from agentvisor.actions import Action
from agentvisor.approvals import check_grant_pattern
from agentvisor.errors import ConfigError
from agentvisor.state.grants import GrantStore, parse_duration

from .conftest import ctx, make_engine


@pytest.fixture
def store(tmp_path: Path) -> GrantStore:
    return GrantStore(tmp_path / "state" / "grants.sqlite3", check_pattern=check_grant_pattern)


def test_durations() -> None:
    assert parse_duration("30m") == 1800
    assert parse_duration("1h30m") == 5400
    assert parse_duration("2d") == 172800
    for bad in ("", "soon", "10", "0m", "5x"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_grant_allows_then_revoke_stops_it(store: GrantStore) -> None:
    engine = make_engine(grants=store)
    action = Action("exec", "git push --force origin main")
    assert engine.decide(action, ctx()).verdict == "ask"
    grant = store.add("exec", "git push --force *", duration=600, reason="release")
    d = engine.decide(action, ctx())
    assert d.verdict == "allow" and d.rule == f"grant:{grant.id}"
    assert store.revoke(grant.id)
    assert engine.decide(action, ctx()).verdict == "ask"
    assert not store.revoke(grant.id)


def test_grant_bound_to_a_session(store: GrantStore) -> None:
    engine = make_engine(grants=store)
    store.add("read", "~/.aws/credentials", session="s1", duration=600)
    assert engine.decide(Action("read", "~/.aws/credentials"), ctx(session="s1")).verdict == "allow"
    assert engine.decide(Action("read", "~/.aws/credentials"), ctx(session="s2")).verdict == "ask"
    assert engine.decide(Action("read", "~/.aws/credentials"), ctx()).verdict == "ask"


def test_expired_grant_stops_matching_by_itself(store: GrantStore) -> None:
    engine = make_engine(grants=store)
    store.add("tool", "deploy", duration=1.0)  # room for a loaded machine
    assert engine.decide(Action("tool", "deploy"), ctx()).verdict == "allow"
    time.sleep(1.2)
    assert engine.decide(Action("tool", "deploy"), ctx()).verdict == "ask"
    assert [g.active() for g in store.all()] == [False]
    assert store.purge_expired() == 1


def test_grant_never_lifts_the_hardline(store: GrantStore) -> None:
    engine = make_engine(grants=store)
    store.add("exec", "*", duration=600)
    assert engine.decide(Action("exec", "rm -rf /"), ctx()).verdict == "deny"
    assert engine.decide(Action("exec", "git push -f"), ctx()).verdict == "allow"


def test_bad_grants_are_refused(store: GrantStore) -> None:
    with pytest.raises(ConfigError):
        store.add("fetch", "https://x/y")
    with pytest.raises(ConfigError):
        store.add("nothing", "x")
    assert store.all() == []


def test_grants_file_is_private(store: GrantStore) -> None:
    store.add("tool", "x", duration=60)
    assert store.path is not None
    assert store.path.stat().st_mode & 0o077 == 0
    assert store.path.parent.stat().st_mode & 0o077 == 0


def test_a_second_store_sees_changes(store: GrantStore) -> None:
    other = GrantStore(store.path)
    engine = make_engine(grants=other)
    assert engine.decide(Action("tool", "t"), ctx()).verdict == "ask"
    grant = store.add("tool", "t", duration=60)
    assert engine.decide(Action("tool", "t"), ctx()).verdict == "allow"
    store.revoke(grant.id)
    assert engine.decide(Action("tool", "t"), ctx()).verdict == "ask"
