"""The audit log on SQLAlchemy: one hash chain, appended to by every gateway on a database.

Each event's ``hash`` is SHA-256 over its content and the previous event's hash; the head
of the chain (last position and hash) lives in the one-row ``audit_chain`` table. An
append reads that row ``FOR UPDATE`` (PostgreSQL) or inside ``BEGIN IMMEDIATE`` (SQLite),
so appends from several threads, processes or hosts form one chain, never a fork.

Group commit: callers hand their event to one writer thread per store and wait; the
writer appends everything queued in one transaction and commits before any caller
returns. A call is therefore never acknowledged before its event is durable, and under
load one fsync serves many calls.

Retention (``audit.retention_days``) deletes a *prefix* of the chain and records the last
deleted event's position and hash as the checkpoint the remaining chain verifies from.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..records import Declared
from .db import Database, database, instance_id
from .events import AuditEvent
from .redaction import bounded, redacted, unchanged
from .schema import audit_chain, audit_events

if TYPE_CHECKING:
    from .redaction import Redact

# The fields a hash covers, in order. Changing this breaks every existing chain.
HASHED = (
    "seq",
    "time",
    "kind",
    "session",
    "agent",
    "tool",
    "arguments",
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
_TEXT = (
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
)
_BATCH = 500
_PRUNE_EVERY = 3600.0
_PAGE = 2000


def event_hash(prev_hash: str, row: Mapping[Any, Any]) -> str:
    body = json.dumps(
        [prev_hash, *(row[k] for k in HASHED)], ensure_ascii=False, separators=(",", ":")
    )
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


class VerifyResult(Declared):
    ok: bool
    checked: int
    first_bad: int | None  # position (seq) of the first broken event
    message: str
    head_seq: int
    head_hash: str
    base_seq: int  # events up to here were pruned by retention
    # Intents (seq) with no outcome: the call was running, or never recorded its end.
    unfinished: tuple[int, ...] = ()


class AuditStore:
    """Implements `agentvisor.state.events.AuditLog` (see docs/audit.md for the API)."""

    def __init__(
        self, db: Database, retention_days: float | None = None, redact: Redact | None = None
    ) -> None:
        self.db = db
        self.retention_days = retention_days
        self.redact = redact or unchanged  # the one redaction point of what is stored
        self.gateway = instance_id()
        self._queue: list[tuple[dict[str, Any], Future[dict[str, Any]]]] = []
        self._cond = threading.Condition()
        self._writer: threading.Thread | None = None
        self._pruned_at = 0.0

    @classmethod
    def open(cls, url: Any = None, retention_days: float | None = None) -> AuditStore:
        return cls(database(url), retention_days)

    # -- writing ------------------------------------------------------------------------

    def record(self, event: AuditEvent) -> None:
        """Append ``event``; returns once it is committed (raises `StateError` if not)."""
        self.record_many([event])

    def record_many(self, events: list[AuditEvent]) -> None:
        """Append ``events`` in order, in one group commit when the writer is idle."""
        rows = [self._row(event) for event in events]
        futures: list[Future[dict[str, Any]]] = [Future() for _ in rows]
        with self._cond:
            self._queue.extend(zip(rows, futures, strict=True))
            if self._writer is None or not self._writer.is_alive():
                self._writer = threading.Thread(
                    target=self._write_loop, daemon=True, name="agentvisor-audit-writer"
                )
                self._writer.start()
            self._cond.notify()
        for event, future in zip(events, futures, strict=True):
            stored = future.result()
            event.seq, event.hash = stored["seq"], stored["hash"]
            event.prev_hash, event.gateway = stored["prev_hash"], stored["gateway"]

    def _row(self, event: AuditEvent) -> dict[str, Any]:
        row: dict[str, Any] = {
            k: _clean(redacted(_text(getattr(event, k)), self.redact)) for k in _TEXT
        }
        row["time"] = float(event.time)
        row["duration"] = float(event.duration) if event.duration is not None else None
        row["gateway"] = _clean(event.gateway) or self.gateway
        row["arguments"] = (
            None
            if event.arguments is None
            else _clean(
                json.dumps(
                    bounded(event.arguments, self.redact),
                    sort_keys=True,
                    ensure_ascii=False,
                    default=str,
                )
            )
        )
        return row

    def _write_loop(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    if not self._cond.wait(60.0):
                        self._writer = None  # idle: a later record starts a new writer
                        return
                batch, self._queue = self._queue[:_BATCH], self._queue[_BATCH:]
            try:
                stored = self._append([row for row, _ in batch])
            except Exception as exc:  # every caller in the batch sees the failure
                for _, future in batch:
                    future.set_exception(exc)
                continue
            for (_, future), row in zip(batch, stored, strict=True):
                future.set_result(row)
            self._maybe_prune()

    def _append(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with self.db.begin() as conn:
            seq, prev = conn.execute(
                sa.select(audit_chain.c.head_seq, audit_chain.c.head_hash)
                .where(audit_chain.c.id == 1)
                .with_for_update()
            ).one()
            out = []
            for row in rows:
                seq += 1
                full = {**row, "seq": seq, "prev_hash": prev}
                full["hash"] = prev = event_hash(prev, full)
                out.append(full)
            conn.execute(sa.insert(audit_events), out)
            conn.execute(
                sa.update(audit_chain)
                .where(audit_chain.c.id == 1)
                .values(head_seq=seq, head_hash=prev)
            )
        return out

    # -- retention ----------------------------------------------------------------------

    def _maybe_prune(self) -> None:
        if self.retention_days is None or time.time() - self._pruned_at < _PRUNE_EVERY:
            return
        try:
            self.prune()
        except Exception:  # pruning is housekeeping: a failure must not stop recording
            self._pruned_at = time.time()

    def prune(self, retention_days: float | None = None, now: float | None = None) -> int:
        """Delete events older than the retention period (a prefix of the chain); the last
        deleted event becomes the checkpoint. Returns how many were deleted."""
        days = self.retention_days if retention_days is None else retention_days
        now = time.time() if now is None else now
        self._pruned_at = now
        if days is None:
            return 0
        cutoff = now - days * 86400
        with self.db.begin() as conn:
            chain = conn.execute(
                sa.select(audit_chain).where(audit_chain.c.id == 1).with_for_update()
            ).one()
            # Up to the first event still inside the period: the chain stays contiguous
            # even if clocks of several gateways disagree a little.
            first_kept = conn.execute(
                sa.select(sa.func.min(audit_events.c.seq)).where(audit_events.c.time >= cutoff)
            ).scalar()
            last = chain.head_seq if first_kept is None else first_kept - 1
            if last <= chain.base_seq:
                return 0
            base_hash = conn.execute(
                sa.select(audit_events.c.hash).where(audit_events.c.seq == last)
            ).scalar()
            if base_hash is None:  # the event to anchor on is gone: leave it to verify
                return 0
            count = conn.execute(sa.delete(audit_events).where(audit_events.c.seq <= last)).rowcount
            conn.execute(
                sa.update(audit_chain)
                .where(audit_chain.c.id == 1)
                .values(base_seq=last, base_hash=base_hash, pruned_at=now)
            )
        # Appended directly: prune also runs on the writer thread, which record() waits on.
        self._append(
            [
                self._row(
                    AuditEvent(
                        kind="retention",
                        ref=str(last),
                        reason=f"audit.retention_days is {days:g}",
                        result=f"pruned {count} events up to #{last}; the chain now starts from "
                        f"checkpoint #{last} {base_hash}",
                    )
                )
            ]
        )
        return count

    # -- reading ------------------------------------------------------------------------

    def events(
        self,
        *,
        session: str | None = None,
        since: float | None = None,
        until: float | None = None,
        decision: str | None = None,
        kind: str | None = None,
        after_seq: int | None = None,
        limit: int = 1000,
    ) -> list[AuditEvent]:
        """Matching events in chain order: after ``after_seq`` the oldest ``limit``,
        otherwise the newest ``limit``."""
        t = audit_events
        query = sa.select(t)
        for column, value in ((t.c.session, session), (t.c.decision, decision), (t.c.kind, kind)):
            if value is not None:
                query = query.where(column == value)
        if since is not None:
            query = query.where(t.c.time >= since)
        if until is not None:
            query = query.where(t.c.time < until)
        if after_seq is not None:
            query = query.where(t.c.seq > after_seq).order_by(t.c.seq).limit(limit)
        else:
            query = query.order_by(t.c.seq.desc()).limit(limit)
        with self.db.read() as conn:
            rows = conn.execute(query).mappings().all()
        events = [_event(row) for row in rows]
        return events if after_seq is not None else events[::-1]

    def latest_seq(self) -> int:
        with self.db.read() as conn:
            return int(
                conn.execute(
                    sa.select(audit_chain.c.head_seq).where(audit_chain.c.id == 1)
                ).scalar()
                or 0
            )

    def follow(
        self,
        after_seq: int | None = None,
        stop: threading.Event | None = None,
        poll: float = 0.5,
        **filters: Any,
    ) -> Iterator[AuditEvent]:
        """New events as they are committed, by any gateway, until ``stop`` is set."""
        last = self.latest_seq() if after_seq is None else after_seq
        stop = stop or threading.Event()
        while not stop.is_set():
            batch = self.events(after_seq=last, limit=_PAGE, **filters)
            if batch:
                yield from batch
                last = batch[-1].seq or last
                continue
            # Filtered-out events still move the position on.
            last = max(last, self.latest_seq()) if filters else last
            stop.wait(poll)

    # -- verifying ----------------------------------------------------------------------

    def verify(self) -> VerifyResult:
        """Walk the chain from the retention checkpoint to the head."""
        with self.db.read() as conn:
            if self.db.postgres:  # one snapshot: appends and pruning meanwhile are not seen
                conn.execution_options(isolation_level="REPEATABLE READ")
            chain = conn.execute(sa.select(audit_chain).where(audit_chain.c.id == 1)).one()
            expected, prev, checked = chain.base_seq + 1, chain.base_hash, 0
            intents: dict[str, int] = {}  # call id -> seq of its intent, until an outcome

            def result(bad: int | None, message: str) -> VerifyResult:
                return VerifyResult(
                    bad is None,
                    checked,
                    bad,
                    message,
                    chain.head_seq,
                    chain.head_hash,
                    chain.base_seq,
                    tuple(sorted(intents.values())),
                )

            while True:
                rows = (
                    conn.execute(
                        sa.select(audit_events)
                        .where(audit_events.c.seq >= expected, audit_events.c.seq <= chain.head_seq)
                        .order_by(audit_events.c.seq)
                        .limit(_PAGE)
                    )
                    .mappings()
                    .all()
                )
                for row in rows:
                    if row["seq"] != expected:
                        return result(
                            expected,
                            f"event #{expected} is missing (the next one "
                            f"is #{row['seq']}): events were deleted",
                        )
                    if row["prev_hash"] != prev:
                        return result(
                            expected,
                            f"event #{expected} does not link to event "
                            f"#{expected - 1} (previous-hash mismatch): one of them "
                            "was changed, or events were removed between them",
                        )
                    if event_hash(prev, row) != row["hash"]:
                        return result(
                            expected,
                            f"event #{expected} was changed after it was "
                            "written (its content does not match its hash)",
                        )
                    prev, expected, checked = row["hash"], expected + 1, checked + 1
                    if row["kind"] == "intent" and row["ref"]:
                        intents[row["ref"]] = row["seq"]
                    elif row["kind"] == "call" and row["ref"]:
                        intents.pop(row["ref"], None)
                if len(rows) < _PAGE:
                    break
            # In this snapshot nothing legitimate lies past the head.
            extra = conn.execute(
                sa.select(sa.func.min(audit_events.c.seq)).where(
                    audit_events.c.seq > chain.head_seq
                )
            ).scalar()
        if extra is not None and expected - 1 == chain.head_seq:
            return result(
                extra,
                f"event #{extra} lies past the chain head "
                f"#{chain.head_seq}: it was inserted behind agentvisor's back",
            )
        if expected - 1 != chain.head_seq or prev != chain.head_hash:
            return result(
                expected,
                f"the chain head says #{chain.head_seq} but the log ends "
                f"at #{expected - 1}: events were removed from the end, or the "
                "head was changed",
            )
        start = f" from checkpoint #{chain.base_seq}" if chain.base_seq else ""
        message = f"ok: {checked} events{start}, head #{chain.head_seq} {chain.head_hash}"
        if intents:
            message += f"; {_unfinished(sorted(intents.values()))}"
        return result(None, message)

    def finished(self, call_ids: Iterable[str]) -> set[str]:
        """Which of these calls (intent ``ref``s) have an outcome recorded."""
        wanted = [c for c in call_ids if c]
        if not wanted:
            return set()
        t = audit_events
        with self.db.read() as conn:
            rows = conn.execute(
                sa.select(t.c.ref).where(t.c.kind == "call", t.c.ref.in_(wanted))
            ).all()
        return {row[0] for row in rows}


def _unfinished(seqs: list[int]) -> str:
    shown = ", ".join(f"#{s}" for s in seqs[:10]) + (", ..." if len(seqs) > 10 else "")
    return (
        f"{len(seqs)} call(s) started with no outcome recorded ({shown}): still running, "
        "or the gateway stopped or could not write before they ended"
    )


_FIELDS = set(AuditEvent.__match_args__)


def _event(row: Mapping[Any, Any]) -> AuditEvent:
    values = {k: v for k, v in row.items() if k in _FIELDS}
    if values.get("arguments") is not None:
        values["arguments"] = json.loads(values["arguments"])
    return AuditEvent(**values)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _clean(value: Any) -> str | None:
    """Text PostgreSQL accepts (no NUL, valid UTF-8), identical when read back."""
    if value is None:
        return None
    text = str(value).replace("\x00", "\\x00")
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
