"""State storage on SQLAlchemy: the audit log, grants and the shared approval queue.

    state = State.from_config(config)    # audit.url / state.url; SQLite file by default
    state.audit       AuditStore     hash-chained events (agentvisor log, log verify)
    state.grants      GrantStore     the operator's scoped grants
    state.approvals   ApprovalQueue  pending asks any gateway on the database can answer
    state.refusals    RefusalStore   refused requests a person can grant by id
    state.channel(t)  QueueChannel   the approval channel a gateway registers

The names below are loaded on first use: the stores import SQLAlchemy, which ``agentvisor
exec`` and ``--help`` must not pay for, while the light modules of this package (`events`,
`asks`, `grants` for reading) are imported on that path. docs/audit.md describes the API.

This package sits on layer 5 of ARCHITECTURE.md: it imports only the foundation (actions,
errors, paths, records), never the policy, approvals or gateway above or beside it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from .approvals import AnswerResult, ApprovalQueue, PendingAsk, QueueChannel
    from .audit import AuditStore, VerifyResult
    from .db import Database, StateError, database, default_url
    from .grants import GrantStore
    from .refusals import Refusal, RefusalStore
    from .store import State

# Where each public name lives, for the lazy lookup below.
_HOMES = {
    "AnswerResult": "approvals",
    "ApprovalQueue": "approvals",
    "PendingAsk": "approvals",
    "QueueChannel": "approvals",
    "AuditStore": "audit",
    "VerifyResult": "audit",
    "Database": "db",
    "StateError": "db",
    "database": "db",
    "default_url": "db",
    "GrantStore": "grants",
    "Refusal": "refusals",
    "RefusalStore": "refusals",
    "State": "store",
}

__all__ = [
    "AnswerResult",
    "ApprovalQueue",
    "AuditStore",
    "Database",
    "GrantStore",
    "PendingAsk",
    "QueueChannel",
    "Refusal",
    "RefusalStore",
    "State",
    "StateError",
    "VerifyResult",
    "database",
    "default_url",
]


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
