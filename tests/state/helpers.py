"""Small helpers shared by the state tests."""

from __future__ import annotations

import sqlalchemy as sa

from agentvisor.state import AuditStore, database
from agentvisor.state.events import AuditEvent


def store(url: str, retention_days: float | None = None) -> AuditStore:
    return AuditStore(database(url), retention_days)


def call(
    n: int, session: str = "s-1", decision: str = "allow", kind: str = "call", **extra
) -> AuditEvent:
    return AuditEvent(
        kind=kind,
        session=session,
        agent="agent-x",
        tool="terminal",
        arguments={"command": f"echo {n}"},
        decision=decision,
        rule="default:exec",
        reason="allowed by default",
        result=f"{n}",
        duration=0.01,
        **extra,
    )


def tamper(url: str, sql: str, **params) -> None:
    """Change the database behind agentvisor's back, as an attacker with access would."""
    with database(url).engine.begin() as conn:
        conn.execute(sa.text(sql), params)
