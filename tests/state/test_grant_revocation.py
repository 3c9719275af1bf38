"""Issue 16: `agentvisor grants --all` lists revoked grants too, as its help says, and a
database made before revocations were kept is migrated without losing its grants."""

from __future__ import annotations

import json
import os
import sqlite3

from agentvisor.actions import Action
from agentvisor.state import migrate
from agentvisor.state.grants import GrantStore
from tests.conftest import run_cli
from tests.policy.conftest import ctx, make_engine


def test_grants_all_lists_revoked_and_expired_grants(tmp_path):
    env = dict(os.environ, HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path / "state"))
    made = [
        run_cli("grant", "tool", name, "--for", duration, env=env, cwd=tmp_path)
        for name, duration in (("deploy", "1h"), ("backup", "1h"))
    ]
    revoked = made[0].stdout.split(":")[0]
    assert run_cli("revoke", revoked, env=env, cwd=tmp_path).returncode == 0
    assert run_cli("revoke", revoked, env=env, cwd=tmp_path).returncode == 2  # once only
    listed = run_cli("grants", env=env, cwd=tmp_path).stdout
    assert "backup" in listed and "deploy" not in listed
    listed = run_cli("grants", "--all", env=env, cwd=tmp_path).stdout.splitlines()
    [line] = [line for line in listed if revoked in line]
    assert "'deploy'" in line and "(revoked " in line and "by operator" in line
    rows = run_cli("grants", "--all", "--json", env=env, cwd=tmp_path).stdout.splitlines()
    by_id = {row["id"]: row for row in map(json.loads, rows)}
    assert by_id[revoked]["active"] is False and by_id[revoked]["revoked_by"] == "operator"
    assert "--all" in run_cli("grants", "--help", env=env).stdout
    assert "expired and revoked" in run_cli("grants", "--help", env=env).stdout


def test_a_revoked_grant_no_longer_allows(tmp_path):
    store = GrantStore(tmp_path / "state.db")
    engine = make_engine(grants=GrantStore(tmp_path / "state.db"))
    grant = store.add("tool", "deploy", duration=600)
    assert engine.decide(Action("tool", "deploy"), ctx()).verdict == "allow"
    assert store.revoke(grant.id, by="web:bob")
    assert engine.decide(Action("tool", "deploy"), ctx()).verdict == "ask"
    [kept] = store.all()
    assert (kept.id, kept.revoked_by, kept.active()) == (grant.id, "web:bob", False)


def test_a_database_from_before_is_migrated_with_its_grants(tmp_path):
    path = tmp_path / "state.db"
    store = GrantStore(path)
    grant = store.add("tool", "deploy", duration=600)
    # Back to the first schema, as an older agentvisor left it.
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE grants DROP COLUMN revoked_at")
        conn.execute("ALTER TABLE grants DROP COLUMN revoked_by")
        conn.execute("DROP TABLE refusals")  # added by a later revision
        conn.execute("UPDATE alembic_version SET version_num = '0001'")
    from agentvisor.state import db

    db._cache.clear()
    again = GrantStore(path)
    assert again.revoke(grant.id)  # opens, migrates, then marks
    with sqlite3.connect(path) as conn:
        version = conn.execute("SELECT version_num FROM alembic_version").fetchone()[0]
    assert version == migrate.HEAD
    assert [(g.id, g.active()) for g in again.all()] == [(grant.id, False)]
