"""State storage on SQLAlchemy: the audit log, grants and the shared approval queue.

    state = State.from_config(config)    # audit.url / state.url; SQLite file by default
    state.audit       AuditStore     hash-chained events (agentvisor log, log verify)
    state.grants      GrantStore     the operator's scoped grants
    state.approvals   ApprovalQueue  pending asks any gateway on the database can answer
    state.channel(t)  QueueChannel   the approval channel a gateway registers

Import this package inside functions: it imports SQLAlchemy, which ``agentvisor exec``
and ``--help`` must not pay for. docs/audit.md describes the API.
"""

from __future__ import annotations

from typing import Any

from ..grants import GrantStore
from .approvals import AnswerResult, ApprovalQueue, PendingAsk, QueueChannel
from .audit import AuditStore, VerifyResult
from .db import Database, StateError, database, default_url

__all__ = [
    "AnswerResult",
    "ApprovalQueue",
    "AuditStore",
    "Database",
    "GrantStore",
    "PendingAsk",
    "QueueChannel",
    "State",
    "StateError",
    "VerifyResult",
    "database",
    "default_url",
]


class State:
    def __init__(
        self, audit_url: Any = None, state_url: Any = None, retention_days: float | None = None
    ) -> None:
        audit_url = audit_url or default_url()
        state_url = state_url or audit_url
        self.audit = AuditStore(database(audit_url), retention_days)
        self.grants = GrantStore(state_url, audit=self.audit)
        self.approvals = ApprovalQueue(database(state_url), self.audit)

    @classmethod
    def from_config(cls, config: Any) -> State:
        return cls(config.audit.url, config.state.url, config.audit.retention_days)

    def start(self) -> None:
        """At a gateway's start: pending asks of stopped gateways are expired as denied,
        and the retention period is applied."""
        self.approvals.recover()
        self.audit.prune()

    def channel(self, timeout: float) -> QueueChannel:
        return QueueChannel(self.approvals, timeout)
