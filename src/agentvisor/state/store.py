"""`State`: the audit log, grants, approval queue and grantable refusals of one
configuration, opened together."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .approvals import ApprovalQueue, QueueChannel
from .audit import AuditStore
from .db import database, default_url
from .grants import GrantStore
from .refusals import RefusalStore

if TYPE_CHECKING:
    from .grants import PatternCheck
    from .redaction import Redact


class State:
    """``check_pattern``: the policy's check of a grant's pattern (see `GrantStore`).
    ``redact``: the gateway's redaction function, applied to every text stored
    (`agentvisor.state.redaction`)."""

    def __init__(
        self,
        audit_url: Any = None,
        state_url: Any = None,
        retention_days: float | None = None,
        check_pattern: PatternCheck | None = None,
        redact: Redact | None = None,
    ) -> None:
        audit_url = audit_url or default_url()
        state_url = state_url or audit_url
        self.audit = AuditStore(database(audit_url), retention_days, redact)
        self.grants = GrantStore(state_url, audit=self.audit, check_pattern=check_pattern)
        self.approvals = ApprovalQueue(database(state_url), self.audit, redact)
        self.refusals = RefusalStore(database(state_url), redact)

    @classmethod
    def from_config(
        cls, config: Any, check_pattern: PatternCheck | None = None, redact: Redact | None = None
    ) -> State:
        retention = config.audit.retention_days
        return cls(config.audit.url, config.state.url, retention, check_pattern, redact)

    def start(self) -> None:
        """At a gateway's start: pending asks of stopped gateways are expired as denied,
        and the retention period is applied."""
        self.approvals.recover()
        self.audit.prune()

    def channel(self, timeout: float, shared: bool = True) -> QueueChannel:
        return QueueChannel(self.approvals, timeout, shared)
