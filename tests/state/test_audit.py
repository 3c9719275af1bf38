"""The audit log: one hash chain, tamper detection naming the first broken event, filters,
retention with a checkpoint, and several writers forming one chain. Each test runs on
SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import itertools
import json
import multiprocessing
import os
import time

import pytest

from agentvisor.state.audit import event_hash
from agentvisor.state.events import AuditEvent
from tests.conftest import run_cli
from tests.state.helpers import call, store, tamper


def test_chain_verifies_and_links_every_event(any_url):
    log = store(any_url)
    for n in range(20):
        log.record(call(n))
    result = log.verify()
    assert result.ok and result.checked == 20 and result.first_bad is None
    events = log.events()
    assert [e.seq for e in events] == list(range(1, 21))
    assert events[0].prev_hash == "0" * 64
    for before, after in itertools.pairwise(events):
        assert after.prev_hash == before.hash
    assert result.head_hash == events[-1].hash


def test_changed_content_names_the_first_broken_event(any_url):
    log = store(any_url)
    for n in range(10):
        log.record(call(n))
    assert log.verify().ok  # control: the chain was sound before the change
    tamper(
        any_url,
        "UPDATE audit_events SET decision = 'allow', result = 'nothing' WHERE seq IN (4, 7)",
    )
    result = log.verify()
    assert not result.ok and result.first_bad == 4 and result.checked == 3
    assert "#4" in result.message and "changed" in result.message


def test_recomputed_hash_is_still_caught_at_the_next_link(any_url):
    log = store(any_url)
    for n in range(6):
        log.record(call(n))
    # A careful attacker rewrites event 3 and recomputes its own hash: event 4 no longer
    # links to it.
    row = {e.seq: e for e in log.events()}[3]
    forged = {
        k: getattr(row, k)
        for k in (
            "seq",
            "time",
            "kind",
            "session",
            "agent",
            "tool",
            "decision",
            "rule",
            "reason",
            "approver",
            "channel",
            "ref",
            "result",
            "duration",
            "gateway",
        )
    }
    forged["arguments"] = json.dumps({"command": "something harmless"}, sort_keys=True)
    tamper(
        any_url,
        "UPDATE audit_events SET arguments = :a, hash = :h WHERE seq = 3",
        a=forged["arguments"],
        h=event_hash(row.prev_hash, forged),
    )
    result = log.verify()
    assert not result.ok and result.first_bad == 4 and "link" in result.message


def test_deleted_events_are_detected(any_url):
    log = store(any_url)
    for n in range(8):
        log.record(call(n))
    tamper(any_url, "DELETE FROM audit_events WHERE seq = 5")
    result = log.verify()
    assert result.first_bad == 5 and "missing" in result.message


def test_truncated_tail_is_detected(any_url):
    log = store(any_url)
    for n in range(8):
        log.record(call(n))
    tamper(any_url, "DELETE FROM audit_events WHERE seq >= 7")
    result = log.verify()
    assert not result.ok and result.first_bad == 7 and "end" in result.message


def test_events_inserted_past_the_head_are_detected(any_url):
    log = store(any_url)
    for n in range(3):
        log.record(call(n))
    tamper(
        any_url,
        "INSERT INTO audit_events (seq, time, kind, prev_hash, hash) VALUES (4, 0, 'call', :h, :h)",
        h="f" * 64,
    )
    result = log.verify()
    assert result.first_bad == 4 and "past the chain head" in result.message


def test_verify_cli_names_the_broken_event(any_url, tmp_path):
    log = store(any_url)
    for n in range(5):
        log.record(call(n))
    ok = run_cli("log", "verify", "--url", any_url, cwd=tmp_path)
    assert ok.returncode == 0 and "ok: 5 events" in ok.stdout
    tamper(any_url, "UPDATE audit_events SET reason = 'edited' WHERE seq = 2")
    broken = run_cli("log", "verify", "--url", any_url, cwd=tmp_path)
    assert broken.returncode == 1 and "BROKEN at event #2" in broken.stdout
    as_json = run_cli("log", "verify", "--url", any_url, "--json", cwd=tmp_path)
    assert json.loads(as_json.stdout)["first_bad"] == 2


def test_filters_and_json_output(any_url, tmp_path):
    log = store(any_url)
    old = time.time() - 7200
    log.record(call(1, session="s-a", time=old))
    log.record(call(2, session="s-b", decision="deny"))
    log.record(call(3, session="s-a", decision="deny"))
    log.record(AuditEvent(kind="sandbox", session="s-a", result="session closed"))
    assert [e.result for e in log.events(session="s-a", kind="call")] == ["1", "3"]
    assert [e.result for e in log.events(decision="deny")] == ["2", "3"]
    assert [e.result for e in log.events(since=time.time() - 3600, kind="call")] == ["2", "3"]
    assert [e.seq for e in log.events(after_seq=2)] == [3, 4]
    assert [e.seq for e in log.events(limit=2)] == [3, 4]

    out = run_cli(
        "log", "--url", any_url, "--json", "--session", "s-a", "--decision", "deny", cwd=tmp_path
    )
    lines = [json.loads(line) for line in out.stdout.splitlines()]
    assert len(lines) == 1 and lines[0]["result"] == "3" and lines[0]["session"] == "s-a"
    assert lines[0]["arguments"] == {"command": "echo 3"} and len(lines[0]["hash"]) == 64
    out = run_cli("log", "--url", any_url, "--json", "--since", "1h", cwd=tmp_path)
    assert [json.loads(line)["seq"] for line in out.stdout.splitlines()] == [2, 3, 4]
    table = run_cli("log", "--url", any_url, cwd=tmp_path).stdout.splitlines()
    assert len(table) == 4 and "session" in table[0]  # a header, the calls
    assert "s-b" in table[2] and "deny" in table[2] and 'command="echo 2"' in table[2]
    table = run_cli("log", "--url", any_url, "--all", cwd=tmp_path).stdout.splitlines()
    assert len(table) == 5 and "session closed" in table[4]
    bad = run_cli("log", "--url", any_url, "--since", "yesterday-ish", cwd=tmp_path)
    assert bad.returncode == 2 and "--since" in bad.stderr


def test_follow_prints_events_from_another_writer(any_url, tmp_path):
    import subprocess

    from tests.conftest import AGENTVISOR

    log = store(any_url)
    log.record(call(1))
    proc = subprocess.Popen(
        [AGENTVISOR, "log", "--url", any_url, "--follow", "--json"],
        stdout=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    try:
        assert json.loads(proc.stdout.readline())["seq"] == 1
        log.record(call(2))
        assert json.loads(proc.stdout.readline())["result"] == "2"
    finally:
        proc.kill()
        proc.wait()


def test_retention_prunes_a_prefix_and_stays_verifiable(any_url):
    log = store(any_url)
    now = time.time()
    for n in range(5):
        log.record(call(n, time=now - 3 * 86400))
    for n in range(5, 8):
        log.record(call(n, time=now))
    assert log.prune(retention_days=1) == 5
    result = log.verify()
    assert result.ok and result.base_seq == 5, result.message
    assert [e.result for e in log.events(kind="call")] == ["5", "6", "7"]
    assert log.events(kind="retention")[0].ref == "5"
    # Tampering after the checkpoint is still caught.
    tamper(any_url, "UPDATE audit_events SET result = 'x' WHERE seq = 6")
    assert log.verify().first_bad == 6


def test_retention_setting_prunes_while_recording(any_url):
    old = store(any_url)
    for n in range(3):
        old.record(call(n, time=time.time() - 10 * 86400))
    log = store(any_url, retention_days=2)
    log.record(call(3))
    deadline = time.time() + 10
    while log.verify().base_seq != 3 and time.time() < deadline:
        time.sleep(0.05)  # the writer prunes right after committing
    assert log.verify().ok and log.verify().base_seq == 3
    assert [e.result for e in log.events(kind="call")] == ["3"]


def _writer(url: str, name: str, count: int) -> None:
    log = store(url)
    for n in range(count):
        log.record(call(n, session=name))


def test_writers_in_several_processes_form_one_chain(any_url):
    store(any_url)  # migrate once up front
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(any_url, f"p{i}", 40)) for i in range(3)]
    for p in procs:
        p.start()
    _writer(any_url, "main", 40)
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    log = store(any_url)
    result = log.verify()
    assert result.ok and result.checked == 160, result.message
    events = log.events(limit=1000)
    assert sorted({e.gateway for e in events}) and len({e.gateway for e in events}) == 4
    assert all(len([e for e in events if e.session == s]) == 40 for s in ("p0", "p1", "p2", "main"))


def test_sqlite_file_is_private_and_in_wal_mode(sqlite_url):
    log = store(sqlite_url)
    log.record(call(1))
    path = log.db.path
    assert path is not None and path.stat().st_mode & 0o077 == 0
    assert path.parent.stat().st_mode & 0o077 == 0
    with log.db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"


def test_unsupported_urls_are_refused():
    from agentvisor.state import StateError, database

    with pytest.raises(StateError, match="only sqlite"):
        database("mysql://user:pw@db/audit")


def test_a_database_that_cannot_be_written_fails_the_record(tmp_path):
    from agentvisor.state import StateError

    url = f"sqlite:///{tmp_path / 'ro' / 'state.db'}"
    log = store(url)
    log.record(call(1))
    os.chmod(tmp_path / "ro" / "state.db", 0o400)
    tamper(
        url,
        "CREATE TRIGGER no_more BEFORE INSERT ON audit_events "
        "BEGIN SELECT RAISE(ABORT, 'read-only'); END",
    )
    with pytest.raises(StateError, match="read-only"):
        log.record(call(2))


def test_an_intent_with_no_outcome_shows_in_log_and_verify(any_url, tmp_path):
    log = store(any_url)
    log.record(call(1, kind="intent", ref="c-done"))
    log.record(call(1, ref="c-done"))
    log.record(call(2, kind="intent", ref="c-lost"))  # the gateway died while it ran
    result = log.verify()
    assert result.ok and result.unfinished == (3,)
    assert "1 call(s) started with no outcome recorded (#3)" in result.message
    assert log.finished(["c-done", "c-lost"]) == {"c-done"}

    shown = run_cli("log", "--url", any_url, cwd=tmp_path)
    header, *rows = shown.stdout.splitlines()
    assert header.startswith("#") and "kind" in header
    assert len(rows) == 2, rows  # the finished intent is folded into its outcome
    assert rows[0].startswith("#2") and "NO OUTCOME" not in rows[0]
    assert rows[1].startswith("#3") and "intent" in rows[1] and "NO OUTCOME" in rows[1]
    as_json = run_cli("log", "--url", any_url, "--json", cwd=tmp_path).stdout.splitlines()
    assert [json.loads(line).get("no_outcome") for line in as_json] == [None, None, True]
    verified = run_cli("log", "verify", "--url", any_url, cwd=tmp_path)
    assert verified.returncode == 0 and "started with no outcome recorded (#3)" in verified.stdout
