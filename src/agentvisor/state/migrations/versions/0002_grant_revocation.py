"""Revoked grants are kept, marked, so `agentvisor grants --all` can still show them.

Revision ID: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.add_column("grants", sa.Column("revoked_at", sa.Float))
    op.add_column("grants", sa.Column("revoked_by", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("grants") as batch:  # SQLite drops columns by copying
        batch.drop_column("revoked_by")
        batch.drop_column("revoked_at")
