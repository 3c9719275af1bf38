"""Schema migrations, run when a database is opened (Alembic, scripts in ``migrations/``).

A database already at `HEAD` costs one query and never imports Alembic (its import is
~0.3 s). Otherwise Alembic upgrades it inside one transaction that holds a lock — an
advisory lock on PostgreSQL, the write lock on SQLite — so gateways starting together
migrate once, one after the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

if TYPE_CHECKING:
    from .db import Database

HEAD = "0003"
SCRIPTS = Path(__file__).with_name("migrations")
_LOCK_KEY = 0x61676E74  # "agnt": the advisory lock that serialises migrations


def upgrade(db: Database) -> None:
    with db.engine.begin() as conn:
        if db.postgres:
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _LOCK_KEY})
        found = current(conn)
        if found == HEAD:
            return
        if found is not None and found not in known_revisions():
            from .db import StateError

            raise StateError(
                f"the state database {db.engine.url.render_as_string(hide_password=True)} "
                f"was written by a newer agentvisor (schema revision {found}; this one knows "
                f"up to {HEAD}): use that version, or another state.url"
            )
        _alembic_upgrade(conn)


def known_revisions() -> set[str]:
    """The revisions this version has scripts for (``versions/NNNN_name.py``)."""
    return {p.name.split("_", 1)[0] for p in (SCRIPTS / "versions").glob("[0-9]*_*.py")}


def current(conn: sa.Connection) -> str | None:
    if not sa.inspect(conn).has_table("alembic_version"):
        return None
    return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()


def _alembic_upgrade(conn: sa.Connection) -> None:
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(SCRIPTS))
    cfg.attributes["connection"] = conn
    command.upgrade(cfg, "head")
