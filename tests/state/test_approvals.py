"""The shared approval queue: asks written to the database, answered from any process,
the first answer wins, and asks of a stopped gateway expire as denied. SQLite and
PostgreSQL."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

import pytest

from agentvisor.actions import Action, Context, Decision
from agentvisor.approvals import Answer, ApprovalBroker, ApprovalRequest, Pending
from agentvisor.config import config_from_dict
from agentvisor.state import State

ACTION = Action("exec", "sudo systemctl restart nginx")
CONTEXT = Context(session="s-42", agent="agent-x", tool="terminal")
DECISION = Decision(
    "ask",
    "`sudo` runs a command as another user",
    rule="category:privilege",
    patterns=("sudo systemctl restart nginx",),
    details=("sudo",),
)


def request(files: tuple[str, ...] = ()) -> ApprovalRequest:
    return ApprovalRequest(ACTION, CONTEXT, DECISION, files)


def wait_for_pending(state: State, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = state.approvals.pending()
        if found:
            return found
        state.approvals.wait_for_change(0.5)
    raise AssertionError("no pending ask appeared")


def test_an_ask_is_listed_with_what_a_person_needs(any_url):
    state = State(any_url)
    pending = Pending()
    state.channel(60).ask(request(("/etc/agentvisor.yaml",)), pending.submit)
    [ask] = wait_for_pending(state)
    assert ask.session == "s-42" and ask.agent == "agent-x" and ask.tool == "terminal"
    assert ask.action["kind"] == "exec" and ask.action["target"] == ACTION.target
    assert ask.reason == DECISION.reason and ask.rule == "category:privilege"
    assert ask.choices == ["once", "session", "always", "deny"]
    assert ask.config_files == ["/etc/agentvisor.yaml"]
    assert "sudo systemctl restart nginx" in ask.text and ask.expires_at > time.time() + 50
    [event] = state.audit.events(kind="approval")
    assert event.decision == "ask" and event.ref == ask.id and event.session == "s-42"


def _answer_in_process(url: str, ask_id: str, who: str, go, results) -> None:
    state = State(url)
    go.wait()
    results.put((who, bool(state.approvals.answer(ask_id, Answer("once", "web", who)))))


def test_first_answer_wins_across_processes(any_url):
    state = State(any_url)
    pending = Pending()
    channel = state.channel(60)
    channel.ask(request(), pending.submit)
    [ask] = wait_for_pending(state)
    ctx = multiprocessing.get_context("spawn")
    go, results = ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=_answer_in_process, args=(any_url, ask.id, f"p{i}", go, results))
        for i in range(4)
    ]
    for p in procs:
        p.start()
    time.sleep(1.5)  # let them all open the database, then answer at once
    go.set()
    outcomes = dict(results.get(timeout=60) for _ in procs)
    for p in procs:
        p.join(30)
    winners = [who for who, won in outcomes.items() if won]
    assert len(winners) == 1, outcomes
    got = pending.wait(10)
    assert got is not None and got.approver == winners[0] and got.channel == "web"
    late = state.approvals.answer(ask.id, Answer("deny", "webhook", "mallory"))
    assert not late and "already answered" in late.message and winners[0] in late.message
    answers = [e for e in state.audit.events(kind="approval") if e.approver]
    assert len(answers) == 5
    assert [e.approver for e in answers if e.result.startswith("accepted")] == winners
    assert all("refused" in e.result for e in answers if e.approver != winners[0])


def _broker(state: State, timeout: float = 30.0) -> ApprovalBroker:
    config = config_from_dict({"approvals": {"timeout": timeout}})
    return ApprovalBroker(
        config, channels=[state.channel(timeout)], grants=state.grants, config_files=()
    )


def test_broker_waits_for_an_answer_from_elsewhere(any_url):
    state = State(any_url)
    answerer = State(any_url)  # another gateway's handle on the same database
    outcome: list[Decision] = []
    with answerer.approvals.present("dashboard"):
        thread = threading.Thread(
            target=lambda: outcome.append(_broker(state).resolve(ACTION, CONTEXT, DECISION))
        )
        thread.start()
        [ask] = wait_for_pending(answerer)
        assert answerer.approvals.answer(ask.id, Answer("session", "web", "alice"))
        thread.join(20)
    [final] = outcome
    assert final.verdict == "allow" and final.approver == "alice via web"
    # "for this session" became a grant on the shared database, audited.
    [grant] = answerer.grants.active()
    assert grant.session == "s-42" and grant.pattern == ACTION.target
    kinds = [(e.kind, e.decision) for e in answerer.audit.events()]
    assert ("approval", "ask") in kinds and ("approval", "allow") in kinds
    assert ("grant", "grant") in kinds


def test_queue_channel_needs_someone_present(any_url):
    state = State(any_url)
    broker = _broker(state)
    started = time.monotonic()
    denied = broker.resolve(ACTION, CONTEXT, DECISION)
    assert denied.verdict == "deny" and denied.approver == "unattended"
    assert time.monotonic() - started < 5 and state.approvals.pending() == []
    with state.approvals.present("dashboard", ttl=30):
        assert state.channel(30).available()  # control: with a person, it asks
    assert not state.channel(30).available()


def test_unanswered_ask_times_out_as_deny_and_late_answers_are_refused(any_url):
    state = State(any_url)
    with state.approvals.present("dashboard"):
        final = _broker(state, timeout=1.0).resolve(ACTION, CONTEXT, DECISION)
    assert final.verdict == "deny" and final.approver == "timeout"
    [ask] = state.approvals.recent()
    assert ask.status == "timeout"
    late = state.approvals.answer(ask.id, Answer("once", "web", "alice"))
    assert not late and "in time" in late.message


def test_answers_that_do_not_fit_the_ask_are_refused(any_url):
    state = State(any_url)
    pending = Pending()
    state.channel(60).ask(request(("/etc/agentvisor.yaml",)), pending.submit)
    [ask] = wait_for_pending(state)
    r = state.approvals.answer(ask.id, Answer("always", "web", "alice"))
    assert not r and "config_file" in r.message
    r = state.approvals.answer(ask.id, Answer("always", "web", "alice", config_file="/etc/passwd"))
    assert not r and "config_file" in r.message
    assert not state.approvals.answer("a-nothing", Answer("once", "web", "alice"))
    assert state.approvals.get(ask.id).status == "pending"
    r = state.approvals.answer(
        ask.id, Answer("always", "web", "alice", config_file="/etc/agentvisor.yaml")
    )
    assert r and pending.wait(10).config_file == "/etc/agentvisor.yaml"


def _ask_and_die(url: str, ready) -> None:
    state = State(url)
    state.channel(300).ask(request(), Pending().submit)
    ready.set()
    time.sleep(300)


def test_asks_of_a_killed_gateway_expire_as_denied(any_url):
    ctx = multiprocessing.get_context("spawn")
    ready = ctx.Event()
    proc = ctx.Process(target=_ask_and_die, args=(any_url, ready))
    proc.start()
    assert ready.wait(60)
    state = State(any_url)
    [ask] = state.approvals.pending()
    state.start()
    assert state.approvals.get(ask.id).status == "pending"  # control: its gateway is alive
    os.kill(proc.pid, signal.SIGKILL)
    proc.join(10)
    state.start()  # what a restarted gateway does first
    expired = state.approvals.get(ask.id)
    assert expired.status == "expired" and expired.outcome.startswith("denied")
    assert expired.answer is None
    late = state.approvals.answer(ask.id, Answer("once", "web", "alice"))
    assert not late and "stopped" in late.message
    [event] = [e for e in state.audit.events(kind="approval") if e.decision == "deny"]
    assert event.ref == ask.id and "expired as denied" in event.result


def test_asks_of_a_silent_remote_gateway_expire(any_url):
    import sqlalchemy as sa

    from agentvisor.state.schema import approvals, presence

    state = State(any_url)
    pending = Pending()
    state.channel(300).ask(request(), pending.submit)
    [ask] = state.approvals.pending()
    with state.approvals.db.begin() as conn:  # as if another host had asked
        conn.execute(sa.update(approvals).values(gateway="elsewhere:123"))
        conn.execute(
            sa.insert(presence).values(
                id="elsewhere:123",
                role="gateway",
                host="elsewhere",
                pid=123,
                last_seen=time.time(),
                ttl=20,
            )
        )
    state.approvals.recover()
    assert state.approvals.get(ask.id).status == "pending"  # control: heartbeat is fresh
    with state.approvals.db.begin() as conn:
        conn.execute(
            sa.update(presence)
            .where(presence.c.id == "elsewhere:123")
            .values(last_seen=time.time() - 60)
        )
    state.approvals.recover()
    assert state.approvals.get(ask.id).status == "expired"


@pytest.mark.parametrize("choice", ["once", "deny"])
def test_wait_for_change_wakes_on_an_answer(any_url, choice):
    state = State(any_url)
    state.channel(60).ask(request(), Pending().submit)
    [ask] = state.approvals.pending()
    since = state.approvals.version()
    threading.Timer(
        0.3, state.approvals.answer, args=(ask.id, Answer(choice, "web", "alice"))
    ).start()
    started = time.monotonic()
    assert state.approvals.wait_for_change(10, since=since)
    assert time.monotonic() - started < 3
    assert not state.approvals.wait_for_change(0.3)  # nothing else happens
