"""Refused requests a person can grant by id (`agentvisor grant --ask ID`).

Revision ID: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.create_table(
        "refusals",
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("created_at", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
        sa.Column("user", sa.Text, nullable=False),
        sa.Column("gateway", sa.Text, nullable=False),
        sa.Column("session", sa.Text),
        sa.Column("agent", sa.Text),
        sa.Column("tool", sa.Text),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("patterns", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("rule", sa.Text),
        sa.Column("grant_id", sa.Text),
    )


def downgrade() -> None:
    op.drop_table("refusals")
