"""The first schema: audit chain, grants, approvals, presence, counters.

Revision ID: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None

GENESIS = "0" * 64


def upgrade() -> None:
    op.create_table(
        "audit_events",
        sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("time", sa.Float, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        *(
            sa.Column(name, sa.Text)
            for name in (
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
            )
        ),
        sa.Column("duration", sa.Float),
        sa.Column("gateway", sa.Text),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    op.create_index("audit_events_time", "audit_events", ["time"])
    op.create_index("audit_events_session", "audit_events", ["session"])
    chain = op.create_table(
        "audit_chain",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("head_seq", sa.BigInteger, nullable=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        sa.Column("base_seq", sa.BigInteger, nullable=False),
        sa.Column("base_hash", sa.String(64), nullable=False),
        sa.Column("pruned_at", sa.Float),
    )
    op.bulk_insert(
        chain,
        [
            {
                "id": 1,
                "head_seq": 0,
                "head_hash": GENESIS,
                "base_seq": 0,
                "base_hash": GENESIS,
                "pruned_at": None,
            }
        ],
    )
    op.create_table(
        "grants",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("pattern", sa.Text, nullable=False),
        sa.Column("session", sa.Text),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float),
        sa.Column("reason", sa.Text),
        sa.Column("created_by", sa.Text, nullable=False),
    )
    counters = op.create_table(
        "counters",
        sa.Column("name", sa.Text, primary_key=True),
        sa.Column("value", sa.BigInteger, nullable=False),
    )
    op.bulk_insert(counters, [{"name": "grants", "value": 0}, {"name": "approvals", "value": 0}])
    op.create_table(
        "approvals",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("gateway", sa.Text, nullable=False),
        sa.Column("session", sa.Text),
        sa.Column("agent", sa.Text),
        sa.Column("tool", sa.Text),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("decision", sa.Text, nullable=False),
        sa.Column("choices", sa.Text, nullable=False),
        sa.Column("config_files", sa.Text, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        *(
            sa.Column(f"answer_{name}", sa.Text)
            for name in ("choice", "channel", "approver", "reason", "config_file")
        ),
        sa.Column("answered_at", sa.Float),
        sa.Column("outcome", sa.Text),
    )
    op.create_index("approvals_status", "approvals", ["status"])
    op.create_table(
        "presence",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("role", sa.Text, nullable=False),
        sa.Column("host", sa.Text, nullable=False),
        sa.Column("pid", sa.Integer, nullable=False),
        sa.Column("last_seen", sa.Float, nullable=False),
        sa.Column("ttl", sa.Float, nullable=False),
    )
