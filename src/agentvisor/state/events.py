"""The audit log's vocabulary: one `AuditEvent` per tool call, decision, approval, grant
change and sandbox lifecycle change, and the `AuditLog` interface the gateway writes to.

The store is `agentvisor.state.AuditStore` (SQLAlchemy: SQLite by default, PostgreSQL by
``audit.url``): every event is committed before `record` returns, so a call the agent saw
complete is never lost, and each event carries a hash over its content and the previous
event's hash (``agentvisor log verify``). This module stays free of SQLAlchemy so code
that only builds events imports nothing heavy.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Protocol

from ..records import Declared, Default, asdict

if TYPE_CHECKING:
    from .audit import AuditStore

# "intent" is written before a tool runs (write-ahead); the "call" with the same ``ref``
# is its outcome. An intent with no outcome: the call was still running, or the gateway
# stopped or could not write before it finished.
KINDS = (
    "intent",
    "call",
    "network",
    "approval",
    "grant",
    "sandbox",
    "login",
    "retention",
    "changes",
)


class AuditEvent(Declared, frozen=False):
    """One event; mutable because the store fills in ``seq``, the hashes and ``gateway``."""

    kind: str  # one of KINDS
    session: str | None = None
    agent: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None  # secrets already redacted
    decision: str | None = None
    rule: str | None = None
    reason: str | None = None
    approver: str | None = None  # who answered an ask, made or revoked a grant
    result: str | None = None  # a short summary
    duration: float | None = None
    time: float = Default(factory=time.time)
    channel: str | None = None  # the approval channel an answer came through
    ref: str | None = None  # the approval, grant or call (intent and outcome) it is about
    gateway: str | None = None  # host:pid of the gateway that wrote it (set by the store)
    # Set when read back from the store.
    seq: int | None = None
    hash: str | None = None
    prev_hash: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class AuditLog(Protocol):
    def record(self, event: AuditEvent) -> None: ...

    def events(self, *, session: str | None = None, limit: int = 1000) -> list[AuditEvent]: ...


def SQLiteAuditLog(path: str | os.PathLike[str] | None = None) -> AuditStore:
    """An audit store in a SQLite file (the default state database when None)."""
    from . import AuditStore

    return AuditStore.open(path)
