"""Scoped grants: temporary, context-bound allows that an operator makes.

A grant is an allow rule with an id, an optional session it is bound to and an expiry.
Grants live in the state database (``state.url``: a SQLite file under the XDG state
directory by default, or PostgreSQL shared by several gateways), so a grant made on one
gateway holds on every gateway pointed at the same database. The policy engine reads the
active grants on every decision: one integer (the ``grants`` change counter) is compared,
and the grants are re-read only when it moved, so a grant or revocation anywhere takes
effect at the next decision. On PostgreSQL the counter is read only after a NOTIFY from
the writer (milliseconds) or once a second, so decisions do not queue on the database.
An expired grant stops matching by itself.

Reads of a SQLite database use the standard library's sqlite3, so commands that only
decide (``agentvisor exec``, ``check``) never import SQLAlchemy; writes go through
`agentvisor.state` (migrations, the audit log: every grant change is an audit event).

Only the operator creates grants: through ``agentvisor grant`` on the host, the dashboard,
or by answering an approval prompt with "for this session". No tool an agent can call
writes here, the state directory is never visible inside a sandbox, and the policy asks
before an agent runs ``agentvisor grant`` itself (category ``privilege``).
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

from .. import paths
from ..actions import KINDS
from ..errors import ConfigError
from ..records import Declared

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeAlias

    # Raises ValueError when ``pattern`` is not a valid pattern of ``kind``.
    PatternCheck: TypeAlias = Callable[[str, str], None]

_DURATION = r"(\d+(?:\.\d+)?)\s*([smhdw])"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_RECHECK = 1.0  # seconds a PostgreSQL reader trusts its cache without a notification
_COLUMNS = (
    "id, kind, pattern, session, created_at, expires_at, reason, created_by, revoked_at, revoked_by"
)


class Grant(Declared):
    id: str
    kind: str
    pattern: str
    session: str | None
    created_at: float
    expires_at: float | None
    reason: str | None
    created_by: str
    revoked_at: float | None = None
    revoked_by: str | None = None

    def active(self, now: float | None = None) -> bool:
        if self.revoked_at is not None:
            return False
        return self.expires_at is None or (now or time.time()) < self.expires_at

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "pattern": self.pattern,
            "session": self.session,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "reason": self.reason,
            "created_by": self.created_by,
            "revoked_at": self.revoked_at,
            "revoked_by": self.revoked_by,
            "active": self.active(),
        }


def parse_duration(text: str) -> float:
    """``30m``, ``2h``, ``1h30m``, ``45s``, ``1d``, ``1w`` → seconds."""
    cleaned = text.strip().lower()
    duration = re.compile(_DURATION, re.I)  # re caches it; compiled only when parsing
    if not cleaned or duration.sub("", cleaned).strip():
        raise ValueError(f"{text!r} is not a duration (write e.g. 30m, 2h, 1h30m, 1d)")
    seconds = sum(float(n) * _UNITS[u.lower()] for n, u in duration.findall(cleaned))
    if seconds <= 0:
        raise ValueError(f"{text!r}: a duration must be longer than 0")
    return seconds


def default_path() -> Path:
    """The default state database (shared with the audit log and approvals)."""
    return paths.state_dir() / "state.db"


def sqlite_path(url: str | os.PathLike[str]) -> Path | None:
    """The file behind a SQLite URL or plain path; None for another database."""
    text = os.fspath(url)
    if "://" not in text:
        return Path(os.path.expanduser(text))
    scheme, _, rest = text.partition("://")
    if scheme.split("+")[0] != "sqlite":
        return None
    return Path(rest[1:].split("?")[0]) if rest.startswith("/") else None


class GrantStore:
    """The grants on a state database. Cheap to create; the database is opened when used.

    ``url``: a SQLAlchemy URL or a SQLite file path (default: the state database).
    ``audit``: where grant changes are recorded (default: the same database's audit log).
    ``check_pattern``: the policy's check of a pattern for its kind, run before a grant is
    stored (`agentvisor.approvals.check_grant_pattern`). It is passed in because the
    state layer sits beside the policy and must not import it; without it only the kind
    is checked, and a grant whose pattern does not compile grants nothing (the policy
    skips it when it reads the grants).
    """

    def __init__(
        self,
        url: str | os.PathLike[str] | None = None,
        audit: Any = None,
        check_pattern: PatternCheck | None = None,
    ) -> None:
        self.url = os.fspath(url) if url is not None else str(default_path())
        self.path = sqlite_path(self.url)
        self._audit = audit
        self._check_pattern = check_pattern
        self._lock = threading.Lock()
        self._reader: Any = None
        self._version: int | None = None
        self._cached: list[Grant] = []
        self._generation: int | None = None
        self._checked = 0.0

    @classmethod
    def from_config(
        cls, config: Any, audit: Any = None, check_pattern: PatternCheck | None = None
    ) -> GrantStore:
        """The grants of ``state.url`` (else ``audit.url``, else the default file)."""
        url = config.state.url or config.audit.url
        return cls(url, audit, check_pattern)

    # -- writing (through agentvisor.state) ----------------------------------------------

    def _db(self) -> Any:
        from .db import database

        return database(self.url)

    def _record(self, **fields: Any) -> None:
        from .events import AuditEvent

        if self._audit is None:
            from .audit import AuditStore

            self._audit = AuditStore(self._db())
        self._audit.record(AuditEvent(kind="grant", **fields))

    def _write(self, statement: Any) -> int:
        """Run ``statement`` and move the change counter, in one transaction."""
        import sqlalchemy as sa

        from .schema import counters

        db = self._db()
        with db.begin() as conn:
            count: int = conn.execute(statement).rowcount
            if count:
                conn.execute(
                    sa.update(counters)
                    .where(counters.c.name == "grants")
                    .values(value=counters.c.value + 1)
                )
                db.notify(conn, "grants")
        if count and (notifier := db.notifier()) is not None:
            notifier.poke()
        self._version = None
        return count

    def add(
        self,
        kind: str,
        pattern: str,
        session: str | None = None,
        duration: float | None = None,
        reason: str | None = None,
        created_by: str = "operator",
    ) -> Grant:
        """Store a grant after checking its pattern compiles for its kind."""
        import sqlalchemy as sa

        from .schema import grants

        if kind not in KINDS:
            raise ConfigError(f"unknown kind {kind!r} (accepted: {', '.join(KINDS)})")
        if self._check_pattern is not None:
            try:
                self._check_pattern(kind, pattern)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None
        now = time.time()
        import secrets  # hashlib and hmac: only for making a grant

        grant = Grant(
            f"g-{secrets.token_hex(4)}",
            kind,
            pattern,
            session or None,
            now,
            now + duration if duration else None,
            reason,
            created_by,
        )
        self._write(
            sa.insert(grants).values(**{k: getattr(grant, k) for k in _COLUMNS.split(", ")})
        )
        scope = f" for session {grant.session}" if grant.session else ""
        until = (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(grant.expires_at))
            if grant.expires_at
            else "revoked"
        )
        self._record(
            session=grant.session,
            decision="grant",
            rule=f"grant:{grant.id}",
            reason=reason,
            approver=created_by,
            ref=grant.id,
            result=f"granted: allow {kind} {pattern!r}{scope} until {until}",
        )
        return grant

    def revoke(self, grant_id: str, by: str = "operator") -> bool:
        import sqlalchemy as sa

        from .schema import grants

        if self.path is not None and not self.path.exists():
            return False
        # Marked, not deleted: `grants --all` still lists it, with who revoked it and when.
        revocation = (
            sa.update(grants)
            .where(grants.c.id == grant_id, grants.c.revoked_at.is_(None))
            .values(revoked_at=time.time(), revoked_by=by)
        )
        if not self._write(revocation):
            return False
        self._record(
            decision="revoke",
            rule=f"grant:{grant_id}",
            approver=by,
            ref=grant_id,
            result=f"revoked grant {grant_id}",
        )
        return True

    def purge_expired(self) -> int:
        import sqlalchemy as sa

        from .schema import grants

        if self.path is not None and not self.path.exists():
            return 0
        gone = [g.id for g in self.all() if not g.active()]
        if not gone:
            return 0
        count = self._write(sa.delete(grants).where(grants.c.id.in_(gone)))
        if count:
            self._record(
                decision="revoke",
                approver="expiry",
                ref=",".join(gone)[:500],
                result=f"purged {count} expired grants: {', '.join(gone)}"[:500],
            )
        return count

    # -- reading (stdlib sqlite3 for a SQLite file) --------------------------------------

    def all(self) -> list[Grant]:
        """Every grant kept: active, expired and revoked ones."""
        with self._lock:
            return self._read(force=True)

    def active(self, now: float | None = None) -> list[Grant]:
        """Grants in force (not expired, not revoked); re-read only when the grants changed
        anywhere."""
        now = now or time.time()
        with self._lock:
            grants = self._read(force=False)
        return [g for g in grants if g.active(now)]

    def _read(self, force: bool) -> list[Grant]:
        rows = self._read_sqlite(force) if self.path else self._read_sqlalchemy(force)
        if rows is not None:
            self._cached = [Grant(*row) for row in rows]
        return self._cached

    def _read_sqlite(self, force: bool) -> list[tuple[Any, ...]] | None:
        import sqlite3

        assert self.path is not None
        if not self.path.exists():
            self._version, self._reader = None, None
            return []
        try:
            if self._reader is None:
                self._reader = sqlite3.connect(self.path, timeout=5.0, check_same_thread=False)
            version = self._reader.execute(
                "SELECT value FROM counters WHERE name = 'grants'"
            ).fetchone()[0]
            if not force and version == self._version:
                return None
            rows: list[tuple[Any, ...]] = self._reader.execute(
                f"SELECT {_COLUMNS} FROM grants ORDER BY created_at"
            ).fetchall()
        except sqlite3.Error:  # not migrated yet (no tables): no grants
            self._version = None
            return []
        self._version = version
        return rows

    def _read_sqlalchemy(self, force: bool) -> list[tuple[Any, ...]] | None:
        import sqlalchemy as sa

        from .schema import counters, grants

        db = self._db()
        notifier = db.notifier()
        # PostgreSQL: another gateway's change arrives as a NOTIFY; until one does (or a
        # second passed, in case one was lost) the cached grants stand without a query.
        generation = notifier.generation() if notifier is not None else None
        now = time.monotonic()
        if (
            not force
            and self._version is not None
            and generation is not None
            and generation == self._generation
            and now - self._checked < _RECHECK
        ):
            return None
        self._generation, self._checked = generation, now
        with db.read() as conn:
            version = conn.execute(
                sa.select(counters.c.value).where(counters.c.name == "grants")
            ).scalar()
            if not force and version == self._version:
                return None
            rows = conn.execute(
                sa.select(*(grants.c[k] for k in _COLUMNS.split(", "))).order_by(
                    grants.c.created_at
                )
            ).all()
        self._version = version
        return [tuple(r) for r in rows]
