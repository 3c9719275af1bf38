"""The storage underneath: migrations, grants shared by gateways, and start-up cost."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time

import sqlalchemy as sa

from agentvisor.actions import Action, Context
from agentvisor.config import config_from_dict
from agentvisor.policy import PolicyEngine
from agentvisor.state import State, database, migrate, schema
from agentvisor.state.grants import GrantStore
from tests.conftest import REPO, run_cli


def test_migrated_schema_matches_the_tables_the_code_uses(any_url):
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(migrate.SCRIPTS))
    assert ScriptDirectory.from_config(cfg).get_current_head() == migrate.HEAD
    db = database(any_url)
    with db.engine.connect() as conn:
        inspector = sa.inspect(conn)
        assert migrate.current(conn) == migrate.HEAD
        for table in schema.metadata.sorted_tables:
            columns = {c["name"] for c in inspector.get_columns(table.name)}
            assert columns == {c.name for c in table.columns}, table.name


def _open(url: str) -> None:
    database(url)


def test_gateways_starting_together_migrate_once(pg_url):
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_open, args=(pg_url,)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with database(pg_url).engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM alembic_version")).scalar() == 1
        assert conn.execute(sa.text("SELECT count(*) FROM audit_chain")).scalar() == 1


def _grant_in_process(url: str) -> None:
    GrantStore(url).add("tool", "deploy", duration=600, created_by="web:alice")


def _revoke_in_process(url: str, grant_id: str) -> None:
    assert GrantStore(url).revoke(grant_id, by="web:bob")


def _in_process(target, *args) -> None:
    proc = multiprocessing.get_context("spawn").Process(target=target, args=args)
    proc.start()
    proc.join(60)
    assert proc.exitcode == 0


def _settles(engine: PolicyEngine, action: Action, ctx: Context, verdict: str) -> float:
    """Seconds until the engine decides ``verdict`` (a change elsewhere propagating)."""
    start = time.monotonic()
    while engine.decide(action, ctx).verdict != verdict:
        assert time.monotonic() - start < 5, f"still not {verdict}"
        time.sleep(0.01)
    return time.monotonic() - start


def test_a_grant_made_on_one_gateway_holds_on_another_at_once(any_url):
    engine = PolicyEngine.from_config(config_from_dict({}), grants=GrantStore(any_url))
    action, ctx = Action("tool", "deploy"), Context(session="s-1")
    assert engine.decide(action, ctx).verdict == "ask"
    _in_process(_grant_in_process, any_url)
    # SQLite: the next decision reads the change counter; PostgreSQL: the NOTIFY arrives
    # within milliseconds (a one-second re-check stands behind it).
    assert _settles(engine, action, ctx, "allow") < 1.5
    [grant] = GrantStore(any_url).active()
    assert engine.decide(action, ctx).rule == f"grant:{grant.id}"
    _in_process(_revoke_in_process, any_url, grant.id)
    assert _settles(engine, action, ctx, "ask") < 1.5
    # In the same process a change holds at the very next decision.
    again = GrantStore(any_url).add("tool", "deploy", duration=600)
    assert engine.decide(action, ctx).verdict == "allow"
    GrantStore(any_url).revoke(again.id)
    assert engine.decide(action, ctx).verdict == "ask"
    events = State(any_url).audit.events(kind="grant")
    assert [(e.decision, e.approver) for e in events] == [
        ("grant", "web:alice"),
        ("revoke", "web:bob"),
        ("grant", "operator"),
        ("revoke", "operator"),
    ]


def test_expired_grants_purge_and_are_audited(any_url):
    store = GrantStore(any_url)
    store.add("tool", "deploy", duration=0.2)
    time.sleep(0.3)
    assert store.active() == [] and len(store.all()) == 1
    assert store.purge_expired() == 1 and store.all() == []
    [_, purge] = State(any_url).audit.events(kind="grant")
    assert purge.approver == "expiry" and "purged 1" in purge.result


def test_state_url_defaults_to_the_audit_database(tmp_path):
    config = config_from_dict(
        {"audit": {"url": f"sqlite:///{tmp_path / 'a.db'}", "retention_days": 30}}
    )
    state = State.from_config(config)
    assert state.audit.db is state.approvals.db and state.audit.retention_days == 30
    assert GrantStore.from_config(config).path == tmp_path / "a.db"
    split = config_from_dict(
        {
            "audit": {"url": f"sqlite:///{tmp_path / 'a.db'}"},
            "state": {"url": f"sqlite:///{tmp_path / 's.db'}"},
        }
    )
    state = State.from_config(split)
    assert state.approvals.db.path == tmp_path / "s.db" and state.grants.path == tmp_path / "s.db"


def test_deciding_without_sqlalchemy(tmp_path):
    """`agentvisor exec` and `--help` read grants with the standard library only."""
    GrantStore(tmp_path / "state.db").add("tool", "deploy", duration=600)
    code = (
        "import sys; from agentvisor.frontends.cli import build_parser; build_parser(); "
        "from agentvisor.state.grants import GrantStore; "
        f"assert [g.pattern for g in GrantStore({str(tmp_path / 'state.db')!r}).active()]"
        " == ['deploy']; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('sqlalchemy', 'alembic', 'psycopg')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_database_of_a_newer_version_is_refused_in_one_line(tmp_path):
    """Going back to an older agentvisor: a clear refusal, not an Alembic traceback."""
    import sqlite3

    url = f"sqlite:///{tmp_path / 'state.db'}"
    first = run_cli("log", "--url", url, cwd=tmp_path)
    assert first.returncode == 0, first.stderr  # control: this version's own database opens
    with sqlite3.connect(tmp_path / "state.db") as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    r = run_cli("log", "--url", url, cwd=tmp_path)
    assert r.returncode != 0
    assert "written by a newer agentvisor (schema revision 9999" in r.stderr
    assert "Traceback" not in r.stderr
