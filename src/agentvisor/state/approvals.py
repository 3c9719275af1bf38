"""The shared approval queue: pending asks in the state database, answered from anywhere.

    gateway A: broker → QueueChannel.ask → INSERT approvals row (pending) → wait
    anyone:    ApprovalQueue.answer(id, Answer) → UPDATE ... WHERE status = 'pending'
    gateway A: the waiter sees the answer → submit(Answer) → the call goes on

The conditional UPDATE is the one place an answer wins: exactly one succeeds, every later
one is refused with what happened instead. PostgreSQL wakes waiters with LISTEN/NOTIFY
(with a one-second poll behind it); SQLite is polled every 0.1 s.

Liveness (table ``presence``): a gateway heartbeats while it has asks outstanding; an ask
whose gateway stopped (its process is gone, or its heartbeat is stale) is *expired as
denied* by the next gateway that starts or sweeps — never approved. Answerers (a served
dashboard, a configured webhook) announce themselves with `ApprovalQueue.present`; only
then is the queue channel available, so with nobody able to answer an ask is still
denied at once (``approvals.unattended: deny``).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..records import Declared, asdict
from .asks import Answer, ApprovalRequest, render
from .db import Database, instance_id
from .events import AuditEvent
from .redaction import redacted, unchanged
from .schema import approvals, counters, presence

if TYPE_CHECKING:
    from .asks import SubmitFn
    from .redaction import Redact

GATEWAY_TTL = 20.0  # a gateway's asks die with it once its heartbeat is this old
BEAT_EVERY = 5.0
SQLITE_POLL = 0.1
PG_POLL = 1.0  # fallback poll behind LISTEN/NOTIFY
EXPIRY_GRACE = 60.0  # a pending ask this long past its deadline is expired by anyone


class PendingAsk(Declared):
    id: str
    status: str  # pending | answered | timeout | cancelled | withdrawn | expired
    created_at: float
    expires_at: float
    gateway: str
    session: str | None
    agent: str | None
    tool: str | None
    action: dict[str, Any]
    reason: str
    rule: str | None
    details: list[str]
    categories: list[str]
    patterns: list[str]
    hint: str | None
    choices: list[str]
    config_files: list[str]
    text: str
    answer: Answer | None = None
    answered_at: float | None = None
    outcome: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class AnswerResult(Declared):
    accepted: bool
    message: str
    ask: PendingAsk | None = None

    def __bool__(self) -> bool:
        return self.accepted


class _Outstanding(Declared, frozen=False):
    ask_id: str
    request: ApprovalRequest
    submit: SubmitFn
    delivered: Answer | None = None


class ApprovalQueue:
    """Pending asks on a state database (API in docs/audit.md)."""

    def __init__(self, db: Database, audit: Any, redact: Redact | None = None) -> None:
        self.db = db
        self.audit = audit
        self.redact = redact or unchanged  # the one redaction point of what is stored
        self.instance = instance_id()
        self._swept_at = 0.0
        self._notifier = db.notifier()

    # -- reading ------------------------------------------------------------------------

    def pending(self) -> list[PendingAsk]:
        self._sweep_sometimes()
        return self._select(approvals.c.status == "pending", approvals.c.created_at)

    def get(self, ask_id: str) -> PendingAsk | None:
        found = self._select(approvals.c.id == ask_id, approvals.c.created_at)
        return found[0] if found else None

    def recent(self, limit: int = 50) -> list[PendingAsk]:
        return self._select(sa.true(), approvals.c.created_at.desc(), limit)

    def _select(self, where: Any, order: Any, limit: int | None = None) -> list[PendingAsk]:
        query = sa.select(approvals).where(where).order_by(order)
        if limit is not None:
            query = query.limit(limit)
        with self.db.read() as conn:
            return [_ask(row) for row in conn.execute(query).mappings()]

    def version(self) -> int:
        with self.db.read() as conn:
            return int(
                conn.execute(
                    sa.select(counters.c.value).where(counters.c.name == "approvals")
                ).scalar()
                or 0
            )

    def wait_for_change(self, timeout: float, since: int | None = None) -> bool:
        """Block until an ask is added or settled anywhere, or ``timeout`` passes. Pass
        ``since`` (a `version()` read before you looked) so a change in between counts."""
        deadline = time.monotonic() + timeout
        start = self.version() if since is None else since
        if start != self.version():
            return True
        seen = self._notifier.generation() if self._notifier else 0
        while (left := deadline - time.monotonic()) > 0:
            if self._notifier is not None:
                seen = self._notifier.wait(seen, min(left, PG_POLL))
            else:
                time.sleep(min(left, SQLITE_POLL))
            if self.version() != start:
                return True
        return False

    # -- answering ----------------------------------------------------------------------

    def answer(self, ask_id: str, answer: Answer) -> AnswerResult:
        """Settle a pending ask; only the first answer anywhere is accepted."""
        ask = self.get(ask_id)
        if ask is None:
            return AnswerResult(False, f"no approval request {ask_id!r}")
        problem = _invalid(ask, answer)
        if problem is None:
            now = time.time()
            with self.db.begin() as conn:
                won = (
                    conn.execute(
                        sa.update(approvals)
                        .where(
                            approvals.c.id == ask_id,
                            approvals.c.status == "pending",
                            approvals.c.expires_at > now,
                        )
                        .values(
                            status="answered",
                            answer_choice=answer.choice,
                            answer_channel=answer.channel,
                            answer_approver=answer.approver,
                            answer_reason=answer.reason or None,
                            answer_config_file=answer.config_file,
                            answered_at=now,
                            outcome=f"answered {answer.choice} by {answer.approver} via "
                            f"{answer.channel}",
                        )
                    ).rowcount
                    == 1
                )
                if won:
                    self._bump(conn, ask_id)
            ask = self.get(ask_id) or ask
            problem = None if won else refusal(ask)
        verdict = ("deny" if answer.choice == "deny" else "allow") if problem is None else None
        self._record(
            ask,
            decision=verdict,
            approver=answer.approver,
            channel=answer.channel,
            reason=answer.reason or None,
            result=f"accepted: {answer.choice}"
            if problem is None
            else f"answer {answer.choice} refused: {problem}",
        )
        if problem is not None:
            return AnswerResult(False, problem, ask)
        return AnswerResult(True, f"{ask_id}: {answer.choice} accepted", ask)

    # -- liveness -----------------------------------------------------------------------

    def heartbeat(self, name: str, ttl: float = 30.0) -> None:
        """Say a person can answer here (dashboard, webhook) for the next ``ttl`` seconds."""
        self._beat(f"answerer:{name}@{self.instance}", "answerer", ttl)

    @contextlib.contextmanager
    def present(self, name: str, ttl: float = 30.0) -> Iterator[None]:
        """Heartbeats from a thread while open; the presence is removed on exit."""
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(ttl / 3):
                with contextlib.suppress(Exception):  # a missed beat is retried
                    self.heartbeat(name, ttl)

        self.heartbeat(name, ttl)
        thread = threading.Thread(target=beat, daemon=True, name=f"agentvisor-present-{name}")
        thread.start()
        try:
            yield
        finally:
            stop.set()
            with self.db.begin() as conn:
                conn.execute(
                    sa.delete(presence).where(presence.c.id == f"answerer:{name}@{self.instance}")
                )

    def answerers_present(self, own_only: bool = False) -> bool:
        """Can a person answer now? ``own_only``: only answerers of this process count
        (its dashboard, its webhook), not those of other gateways on the database."""
        now = time.time()
        where = [presence.c.role == "answerer", presence.c.last_seen + presence.c.ttl > now]
        if own_only:
            where.append(presence.c.id.like(f"answerer:%@{self.instance}"))
        with self.db.read() as conn:
            count = conn.execute(
                sa.select(sa.func.count()).select_from(presence).where(*where)
            ).scalar()
        return bool(count)

    def _beat(self, key: str, role: str, ttl: float, conn: sa.Connection | None = None) -> None:
        values = {
            "role": role,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "last_seen": time.time(),
            "ttl": ttl,
        }
        with contextlib.ExitStack() as stack:
            if conn is None:
                conn = stack.enter_context(self.db.begin())
            if not conn.execute(
                sa.update(presence).where(presence.c.id == key).values(**values)
            ).rowcount:
                conn.execute(sa.insert(presence).values(id=key, **values))

    # -- crash recovery -----------------------------------------------------------------

    def recover(self) -> int:
        """Expire, as denied, pending asks whose gateway is gone. Returns how many."""
        self._swept_at = time.time()
        now = self._swept_at
        host = socket.gethostname()
        with self.db.begin() as conn:
            alive = {
                row.id: row
                for row in conn.execute(sa.select(presence).where(presence.c.role == "gateway"))
            }
            stale = []
            for row in conn.execute(
                sa.select(approvals.c.id, approvals.c.gateway, approvals.c.expires_at).where(
                    approvals.c.status == "pending"
                )
            ):
                why = _gone(row.gateway, alive.get(row.gateway), self.instance, host, now)
                if why is None and row.expires_at + EXPIRY_GRACE < now:
                    why = "its deadline passed long ago and its gateway never settled it"
                if why is not None:
                    stale.append((row.id, why))
            for ask_id, why in stale:
                conn.execute(
                    sa.update(approvals)
                    .where(approvals.c.id == ask_id, approvals.c.status == "pending")
                    .values(status="expired", outcome=f"denied: {why}")
                )
            if stale:
                self._bump(conn, "")
            conn.execute(
                sa.delete(presence).where(presence.c.last_seen + presence.c.ttl * 10 < now)
            )
        for ask_id, why in stale:
            ask = self.get(ask_id)
            if ask is not None:
                self._record(
                    ask,
                    decision="deny",
                    result=f"expired as denied: {why}",
                    reason="a pending ask from before a gateway stopped is never approved",
                )
        return len(stale)

    def _sweep_sometimes(self) -> None:
        if time.time() - self._swept_at > BEAT_EVERY:
            with contextlib.suppress(Exception):
                self.recover()

    # -- for the channel ----------------------------------------------------------------

    def _create(self, request: ApprovalRequest, timeout: float) -> PendingAsk:
        a, d, c = request.action, request.decision, request.context
        r = self.redact
        now = time.time()
        ask_id = f"a-{secrets.token_hex(5)}"
        row: dict[str, Any] = {
            "id": ask_id,
            "status": "pending",
            "created_at": now,
            "expires_at": now + timeout,
            "gateway": self.instance,
            "session": c.session,
            "agent": c.agent,
            "tool": c.tool,
            "action": json.dumps(
                {
                    "kind": a.kind,
                    "target": r(a.target),
                    "method": a.method,
                    "host": a.host,
                    "argv": [r(arg) for arg in a.argv] if a.argv else None,
                }
            ),
            "decision": json.dumps(
                {
                    "reason": r(d.reason),
                    "rule": d.rule,
                    "details": [r(detail) for detail in d.details],
                    "categories": list(d.categories),
                    "patterns": [r(pattern) for pattern in d.patterns],
                    "hint": redacted(d.hint, r),
                }
            ),
            "choices": json.dumps(list(request.choices)),
            "config_files": json.dumps(list(request.config_files)),
            "text": r(render(request).strip("\n")),
        }
        with self.db.begin() as conn:
            # Alive before the ask exists, so no sweep can take it for an orphan.
            self._beat(self.instance, "gateway", GATEWAY_TTL, conn)
            conn.execute(sa.insert(approvals).values(**row))
            self._bump(conn, ask_id)
        ask = _ask(row)
        self._record(
            ask,
            decision="ask",
            rule=d.rule,
            reason=d.reason,
            channel="queue",
            result=f"waiting for a person: {a.kind} {a.target}"[:500],
        )
        return ask

    def _close(self, ask_id: str, status: str, outcome: str) -> bool:
        with self.db.begin() as conn:
            done = (
                conn.execute(
                    sa.update(approvals)
                    .where(approvals.c.id == ask_id, approvals.c.status == "pending")
                    .values(status=status, outcome=outcome)
                ).rowcount
                == 1
            )
            if done:
                self._bump(conn, ask_id)
        return done

    def _settled(self, ask_ids: list[str]) -> list[PendingAsk]:
        if not ask_ids:
            return []
        return self._select(
            sa.and_(approvals.c.id.in_(ask_ids), approvals.c.status != "pending"),
            approvals.c.created_at,
        )

    def _bump(self, conn: sa.Connection, ask_id: str) -> None:
        conn.execute(
            sa.update(counters)
            .where(counters.c.name == "approvals")
            .values(value=counters.c.value + 1)
        )
        self.db.notify(conn, f"approvals:{ask_id}")

    def _record(self, ask: PendingAsk, **fields: Any) -> None:
        self.audit.record(
            AuditEvent(
                kind="approval",
                session=ask.session,
                agent=ask.agent,
                tool=ask.tool,
                ref=ask.id,
                **fields,
            )
        )


class QueueChannel:
    """The `approvals.channel.Channel` that puts asks in the shared queue and waits."""

    name = "queue"

    def __init__(self, queue: ApprovalQueue, timeout: float, shared: bool = True) -> None:
        """``shared``: people answering for other gateways on the database (their
        dashboards, webhooks) may answer this gateway's asks too. Only when the database
        is shared on purpose: a per-user default file is shared by accident."""
        self.queue = queue
        self.timeout = timeout
        self.shared = shared
        self.where = "the approval queue (dashboard or webhook)"
        self._lock = threading.Lock()
        self._open: dict[int, _Outstanding] = {}
        self._waiter: threading.Thread | None = None

    def available(self) -> bool:
        return self.queue.answerers_present(own_only=not self.shared)

    def ask(self, request: ApprovalRequest, submit: SubmitFn) -> None:
        # Created and registered under the lock: a cancel (a withdrawal as the gateway
        # stops) that comes meanwhile waits for it, so no row is left pending.
        with self._lock:
            ask = self.queue._create(request, self.timeout)
            self._open[request.id] = _Outstanding(ask.id, request, submit)
            if self._waiter is None or not self._waiter.is_alive():
                self._waiter = threading.Thread(
                    target=self._wait_loop, daemon=True, name="agentvisor-approval-queue"
                )
                self._waiter.start()

    def cancel(self, request: ApprovalRequest, outcome: str) -> None:
        with self._lock:
            entry = self._open.pop(request.id, None)
        if entry is None:
            return
        if entry.delivered is not None:
            return  # settled by this channel's own answer
        if outcome == "timed out":
            status, text = "timeout", "denied: nobody answered in time"
        elif outcome.startswith("withdrawn"):  # its caller is gone: nothing will run
            status, text = "withdrawn", outcome
        else:
            status, text = "cancelled", f"settled elsewhere: {outcome}"
        if self.queue._close(entry.ask_id, status, text):
            ask = self.queue.get(entry.ask_id)
            if ask is not None:
                denied = status in ("timeout", "withdrawn")
                self.queue._record(ask, decision="deny" if denied else None, result=text)
            return
        # An answer reached the database after another channel had already won.
        ask = self.queue.get(entry.ask_id)
        if ask is not None and ask.answer is not None:
            self.queue._record(
                ask,
                approver=ask.answer.approver,
                channel=ask.answer.channel,
                result=f"answer {ask.answer.choice} not applied: the request was already {outcome}",
            )

    def _wait_loop(self) -> None:
        beat_at = 0.0
        while True:
            with self._lock:
                waiting = {e.ask_id: e for e in self._open.values() if e.delivered is None}
                if not self._open:
                    self._waiter = None
                    return
            try:
                if time.monotonic() - beat_at > BEAT_EVERY:
                    self.queue._beat(self.queue.instance, "gateway", GATEWAY_TTL)
                    self.queue._sweep_sometimes()
                    beat_at = time.monotonic()
                version = self.queue.version()
                for ask in self.queue._settled(list(waiting)):
                    entry = waiting[ask.id]
                    if ask.status == "answered" and ask.answer is not None:
                        entry.delivered = ask.answer
                        entry.submit(ask.answer)
                self.queue.wait_for_change(BEAT_EVERY, since=version)
            except Exception:  # the database is away: keep waiting; the broker times out
                time.sleep(1.0)


def refusal(ask: PendingAsk) -> str:
    """Why an answer to ``ask`` can no longer be accepted."""
    when = time.strftime("%H:%M:%S", time.localtime(ask.answered_at or ask.expires_at))
    if ask.status == "answered" and ask.answer is not None:
        a = ask.answer
        return (
            f"already answered: {a.choice} by {a.approver} via {a.channel} at {when}; "
            "the first answer wins"
        )
    if ask.status == "pending":
        return f"it timed out at {when}: no answer in time counts as deny"
    if ask.status == "timeout":
        return "nobody answered in time: it was denied"
    return ask.outcome or f"it is {ask.status}"


def _invalid(ask: PendingAsk, answer: Answer) -> str | None:
    if ask.status != "pending":
        return refusal(ask)
    if answer.choice not in ask.choices:
        return f"{answer.choice!r} is not offered for this ask (choices: {', '.join(ask.choices)})"
    if answer.choice == "always" and answer.config_file not in ask.config_files:
        return "'always' needs config_file, one of: " + ", ".join(ask.config_files)
    if not answer.approver or not answer.channel:
        return "an answer must name its approver and channel"
    return None


def _gone(gateway: str, beat: Any, me: str, host: str, now: float) -> str | None:
    """Why the gateway that owns an ask is gone, or None if it may be alive."""
    if gateway == me:
        return None
    ghost, _, pid = gateway.rpartition(":")
    if ghost == host and pid.isdigit() and not _pid_alive(int(pid)):
        return f"the gateway that asked ({gateway}) stopped before an answer"
    if beat is None or beat.last_seen + beat.ttl < now:
        return f"the gateway that asked ({gateway}) stopped sending heartbeats"
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _ask(row: Any) -> PendingAsk:
    decision = json.loads(row["decision"])
    answer = None
    if row.get("answer_choice"):
        answer = Answer(
            row["answer_choice"],
            row["answer_channel"],
            row["answer_approver"],
            row["answer_reason"] or "",
            row["answer_config_file"],
        )
    return PendingAsk(
        id=row["id"],
        status=row["status"],
        created_at=row["created_at"],
        expires_at=row["expires_at"],
        gateway=row["gateway"],
        session=row["session"],
        agent=row["agent"],
        tool=row["tool"],
        action=json.loads(row["action"]),
        reason=decision["reason"],
        rule=decision["rule"],
        details=decision["details"],
        categories=decision["categories"],
        patterns=decision["patterns"],
        hint=decision["hint"],
        choices=json.loads(row["choices"]),
        config_files=json.loads(row["config_files"]),
        text=row["text"],
        answer=answer,
        answered_at=row.get("answered_at"),
        outcome=row.get("outcome"),
    )
