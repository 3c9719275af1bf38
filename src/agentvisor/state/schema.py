"""The tables, as SQLAlchemy Core objects the code queries with.

The migrations in ``migrations/versions/`` create them; `tests/state/test_schema.py`
checks that a migrated database has exactly these columns.
"""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

GENESIS = "0" * 64  # the "previous hash" of the first event ever written

# The tamper-evident log. ``seq`` is the position in the one chain all gateways append to.
audit_events = sa.Table(
    "audit_events",
    metadata,
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("time", sa.Float, nullable=False),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("session", sa.Text),
    sa.Column("agent", sa.Text),
    sa.Column("tool", sa.Text),
    sa.Column("arguments", sa.Text),  # canonical JSON, exactly what was hashed
    sa.Column("decision", sa.Text),
    sa.Column("rule", sa.Text),
    sa.Column("reason", sa.Text),
    sa.Column("approver", sa.Text),
    sa.Column("channel", sa.Text),
    sa.Column("ref", sa.Text),
    sa.Column("result", sa.Text),
    sa.Column("duration", sa.Float),
    sa.Column("gateway", sa.Text),
    sa.Column("prev_hash", sa.String(64), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
)

# One row (id 1): the chain's head, and the checkpoint left by retention pruning (the last
# pruned event's position and hash, so what remains still verifies from there).
audit_chain = sa.Table(
    "audit_chain",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("head_seq", sa.BigInteger, nullable=False),
    sa.Column("head_hash", sa.String(64), nullable=False),
    sa.Column("base_seq", sa.BigInteger, nullable=False),
    sa.Column("base_hash", sa.String(64), nullable=False),
    sa.Column("pruned_at", sa.Float),
)

grants = sa.Table(
    "grants",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("pattern", sa.Text, nullable=False),
    sa.Column("session", sa.Text),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float),
    sa.Column("reason", sa.Text),
    sa.Column("created_by", sa.Text, nullable=False),
    # Set by a revocation: the grant no longer applies, and stays listed (`grants --all`).
    sa.Column("revoked_at", sa.Float),
    sa.Column("revoked_by", sa.Text),
)

# Change counters ("grants", "approvals"): a reader compares one integer instead of
# re-reading a table, on every database and across gateways.
counters = sa.Table(
    "counters",
    metadata,
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("value", sa.BigInteger, nullable=False),
)

approvals = sa.Table(
    "approvals",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("gateway", sa.Text, nullable=False),
    sa.Column("session", sa.Text),
    sa.Column("agent", sa.Text),
    sa.Column("tool", sa.Text),
    sa.Column("action", sa.Text, nullable=False),  # JSON
    sa.Column("decision", sa.Text, nullable=False),  # JSON
    sa.Column("choices", sa.Text, nullable=False),  # JSON list
    sa.Column("config_files", sa.Text, nullable=False),  # JSON list
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("answer_choice", sa.Text),
    sa.Column("answer_channel", sa.Text),
    sa.Column("answer_approver", sa.Text),
    sa.Column("answer_reason", sa.Text),
    sa.Column("answer_config_file", sa.Text),
    sa.Column("answered_at", sa.Float),
    sa.Column("outcome", sa.Text),
)

# Liveness: gateways (whose pending asks die with them) and answerers (a dashboard or a
# webhook that makes the shared approval channel worth asking through).
presence = sa.Table(
    "presence",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("role", sa.Text, nullable=False),  # "gateway" | "answerer"
    sa.Column("host", sa.Text, nullable=False),
    sa.Column("pid", sa.Integer, nullable=False),
    sa.Column("last_seen", sa.Float, nullable=False),
    sa.Column("ttl", sa.Float, nullable=False),
)

# Refused requests that a grant could allow, by the id the agent's refusal names
# (`agentvisor grant --ask ID`): what was refused, for whom, and the grant made of it.
refusals = sa.Table(
    "refusals",
    metadata,
    sa.Column("id", sa.Text, primary_key=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("expires_at", sa.Float, nullable=False),
    sa.Column("user", sa.Text, nullable=False),  # who ran the gateway: only they may grant it
    sa.Column("gateway", sa.Text, nullable=False),
    sa.Column("session", sa.Text),
    sa.Column("agent", sa.Text),
    sa.Column("tool", sa.Text),
    sa.Column("kind", sa.Text, nullable=False),
    sa.Column("target", sa.Text, nullable=False),
    sa.Column("patterns", sa.Text, nullable=False),  # JSON list
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("rule", sa.Text),
    sa.Column("grant_id", sa.Text),  # set once granted: an id grants once
)
