"""An in-process stand-in for ``gateway.state`` (docs/audit.md) while a gateway has none.

It offers the same calls the dashboard and the webhook use — ``approvals`` (pending,
get, recent, answer, present, wait_for_change), ``audit`` (record, events, latest_seq)
and ``grants`` — for one process only: asks are kept in memory, recent audit events are
numbered in memory on their way to the gateway's own audit log. With shared state on a
database, several gateways see one truth instead; this module then goes away.
"""

from __future__ import annotations

import contextlib
import dataclasses
import secrets
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..approvals.channel import Answer, ApprovalRequest, SubmitFn
from ..audit import AuditEvent


@dataclass(frozen=True)
class PendingAsk:
    id: str
    created_at: float
    expires_at: float
    status: str  # pending | answered | timeout | cancelled
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
        out = dataclasses.asdict(self)
        out["answer"] = dataclasses.asdict(self.answer) if self.answer else None
        return out


@dataclass(frozen=True)
class AnswerResult:
    accepted: bool
    message: str
    ask: PendingAsk | None

    def __bool__(self) -> bool:
        return self.accepted


def _pending_from(request: ApprovalRequest, ask_id: str, timeout: float) -> PendingAsk:
    from ..approvals.terminal import render

    a, d, c = request.action, request.decision, request.context
    now = time.time()
    return PendingAsk(
        id=ask_id, created_at=now, expires_at=now + timeout, status="pending", gateway="local",
        session=c.session, agent=c.agent, tool=c.tool,
        action={"kind": a.kind, "target": a.target, "method": a.method, "host": a.host,
                "argv": list(a.argv) if a.argv is not None else None},
        reason=d.reason, rule=d.rule, details=list(d.details), categories=list(d.categories),
        patterns=list(d.patterns), hint=d.hint, choices=list(request.choices),
        config_files=list(request.config_files), text=render(request))


class MemoryQueue:
    """The approval queue of one process; also the broker's channel for it."""

    name = "queue"

    def __init__(self, audit: Any, timeout: float) -> None:
        self.audit = audit
        self.timeout = timeout
        self._lock = threading.Condition()
        self._asks: dict[str, PendingAsk] = {}
        self._submit: dict[str, SubmitFn] = {}
        self._by_request: dict[int, str] = {}
        self._order: deque[str] = deque()
        self._presence = 0
        self._version = 0

    # -- the broker's side (Channel) ------------------------------------------------------

    def available(self) -> bool:
        return self._presence > 0

    def ask(self, request: ApprovalRequest, submit: SubmitFn) -> None:
        ask_id = "a-" + secrets.token_hex(5)
        with self._lock:
            self._asks[ask_id] = _pending_from(request, ask_id, self.timeout)
            self._submit[ask_id] = submit
            self._by_request[request.id] = ask_id
            self._order.append(ask_id)
            while len(self._order) > 500:
                self._asks.pop(self._order.popleft(), None)
            self._changed()

    def cancel(self, request: ApprovalRequest, outcome: str) -> None:
        with self._lock:
            ask_id = self._by_request.pop(request.id, None)
            ask = self._asks.get(ask_id or "")
            if ask is None:
                return
            self._submit.pop(ask.id, None)
            status = ask.status if ask.status != "pending" else (
                "timeout" if "timed out" in outcome else "cancelled")
            self._asks[ask.id] = dataclasses.replace(ask, status=status, outcome=outcome)
            self._changed()

    # -- the people's side ----------------------------------------------------------------

    def pending(self) -> list[PendingAsk]:
        with self._lock:
            return sorted((a for a in self._asks.values() if a.status == "pending"),
                          key=lambda a: a.created_at)

    def get(self, ask_id: str) -> PendingAsk | None:
        with self._lock:
            return self._asks.get(ask_id)

    def recent(self, limit: int = 50) -> list[PendingAsk]:
        with self._lock:
            return sorted(self._asks.values(), key=lambda a: -a.created_at)[:limit]

    def answer(self, ask_id: str, answer: Answer) -> AnswerResult:
        with self._lock:
            ask = self._asks.get(ask_id)
            result = self._judge(ask, answer)
            if result is None and ask is not None:
                if self._submit[ask_id](answer):
                    ask = dataclasses.replace(ask, status="answered", answer=answer,
                                              answered_at=time.time())
                    self._asks[ask_id] = ask
                    self._changed()
                    result = AnswerResult(True, f"{answer.choice}: recorded", ask)
                else:
                    result = AnswerResult(False, "already answered through another channel",
                                          ask)
        self._record(ask_id, ask, answer, result)
        return result

    def _judge(self, ask: PendingAsk | None, answer: Answer) -> AnswerResult | None:
        if ask is None:
            return AnswerResult(False, "no such ask", None)
        if ask.status == "answered" and ask.answer is not None:
            when = time.strftime("%H:%M:%S", time.localtime(ask.answered_at or 0))
            return AnswerResult(False, f"already answered by {ask.answer.approver} via "
                                f"{ask.answer.channel} at {when}", ask)
        if ask.status != "pending":
            return AnswerResult(False, ask.outcome or ask.status, ask)
        if answer.choice not in ask.choices:
            return AnswerResult(False, f"{answer.choice!r} is not a choice for this ask "
                                f"(choices: {', '.join(ask.choices)})", ask)
        if answer.choice == "always" and answer.config_file not in ask.config_files:
            return AnswerResult(False, "an 'always' rule can only go to one of: "
                                + ", ".join(ask.config_files), ask)
        return None

    def _record(self, ask_id: str, ask: PendingAsk | None, answer: Answer,
                result: AnswerResult) -> None:
        self.audit.record(AuditEvent(
            kind="approval", session=ask.session if ask else None,
            agent=ask.agent if ask else None, tool=ask.tool if ask else None,
            arguments={"ask": ask_id, "choice": answer.choice,
                       "config_file": answer.config_file},
            decision=answer.choice if result else "refused",
            reason=answer.reason or None, approver=f"{answer.approver} via {answer.channel}",
            result=("accepted" if result else f"refused: {result.message}")[:500]))

    @contextlib.contextmanager
    def present(self, name: str, ttl: float = 30) -> Iterator[None]:
        with self._lock:
            self._presence += 1
        try:
            yield
        finally:
            with self._lock:
                self._presence -= 1

    def wait_for_change(self, timeout: float) -> bool:
        with self._lock:
            seen = self._version
            return self._lock.wait_for(lambda: self._version != seen, timeout)

    def _changed(self) -> None:
        self._version += 1
        self._lock.notify_all()


@dataclass
class _Numbered:
    seq: int
    event: AuditEvent
    extra: dict[str, Any] = field(default_factory=dict)


class RecentAudit:
    """Passes every event to the gateway's audit log and keeps the recent ones numbered."""

    def __init__(self, inner: Any, keep: int = 5000) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._recent: deque[_Numbered] = deque(maxlen=keep)
        self._seq = 0

    def record(self, event: AuditEvent) -> None:
        self.inner.record(event)
        with self._lock:
            self._seq += 1
            self._recent.append(_Numbered(self._seq, event))

    def latest_seq(self) -> int:
        return self._seq

    def events(self, *, session: str | None = None, since: float | None = None,
               decision: str | None = None, kind: str | None = None,
               after_seq: int | None = None, until: float | None = None,
               limit: int = 1000) -> list[Any]:
        with self._lock:
            rows = [dataclasses.replace(n.event) for n in self._recent
                    if after_seq is None or n.seq > after_seq]
            seqs = [n.seq for n in self._recent if after_seq is None or n.seq > after_seq]
        out = []
        for seq, event in zip(seqs, rows, strict=True):
            if ((session and event.session != session) or (kind and event.kind != kind)
                    or (decision and event.decision != decision)
                    or (since and event.time < since) or (until and event.time > until)):
                continue
            event.seq = seq  # type: ignore[attr-defined]
            out.append(event)
        return out[:limit] if after_seq is not None else out[-limit:]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class LocalGrants:
    """The broker's grants file, with each change audited and the person named."""

    def __init__(self, store: Any, audit: Any) -> None:
        self.store = store
        self.audit = audit

    def all(self) -> list[Any]:
        return self.store.all()

    def add(self, kind: str, pattern: str, session: str | None = None,
            duration: float | None = None, reason: str | None = None,
            created_by: str = "operator") -> Any:
        grant = self.store.add(kind, pattern, session, duration, reason, created_by=created_by)
        self.audit.record(AuditEvent(kind="grant", session=session, decision="allow",
                                     rule=f"grant:{grant.id}", reason=reason,
                                     approver=created_by,
                                     result=f"granted {kind} {pattern!r}"))
        return grant

    def revoke(self, grant_id: str, by: str = "operator") -> bool:
        done = self.store.revoke(grant_id)
        if done:
            self.audit.record(AuditEvent(kind="grant", rule=f"grant:{grant_id}", approver=by,
                                         result=f"revoked {grant_id}"))
        return done


class LocalState:
    """``approvals``, ``audit`` and ``grants`` of one gateway process."""

    def __init__(self, gateway: Any) -> None:
        self.audit = RecentAudit(gateway.audit)
        gateway.audit = self.audit
        self.approvals = MemoryQueue(self.audit, gateway.config.approvals.timeout)
        self.grants = LocalGrants(gateway.broker.grants, self.audit)
        gateway.broker.channels.append(self.approvals)
