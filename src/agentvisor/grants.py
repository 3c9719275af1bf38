"""Scoped grants: temporary, context-bound allows that an operator makes.

A grant is an allow rule with an id, an optional session it is bound to and an expiry,
kept in a SQLite file under the state directory (``$XDG_STATE_HOME/agentvisor``). The
policy engine reads the active grants on every decision (re-reading the file only when
it changed), and an expired grant stops matching by itself.

Only the operator creates grants: through ``agentvisor grant`` on the host, or by
answering an approval prompt with "for this session". No tool an agent can call writes
here, the state directory is never visible inside a sandbox, and the policy asks before
an agent runs ``agentvisor grant`` itself (category ``privilege``).
"""

from __future__ import annotations

import os
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import paths
from .errors import ConfigError

_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])", re.I)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
_MAX_AGE = 1.0  # seconds an in-memory copy of the grants may be used without a re-read
_SCHEMA = """
CREATE TABLE IF NOT EXISTS grants (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    pattern TEXT NOT NULL,
    session TEXT,
    created_at REAL NOT NULL,
    expires_at REAL,
    reason TEXT,
    created_by TEXT NOT NULL
)
"""


@dataclass(frozen=True)
class Grant:
    id: str
    kind: str
    pattern: str
    session: str | None
    created_at: float
    expires_at: float | None
    reason: str | None
    created_by: str

    def active(self, now: float | None = None) -> bool:
        return self.expires_at is None or (now or time.time()) < self.expires_at

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "pattern": self.pattern,
                "session": self.session, "created_at": self.created_at,
                "expires_at": self.expires_at, "reason": self.reason,
                "created_by": self.created_by, "active": self.active()}


def parse_duration(text: str) -> float:
    """``30m``, ``2h``, ``1h30m``, ``45s``, ``1d``, ``1w`` → seconds."""
    cleaned = text.strip().lower()
    if not cleaned or _DURATION_RE.sub("", cleaned).strip():
        raise ValueError(f"{text!r} is not a duration (write e.g. 30m, 2h, 1h30m, 1d)")
    seconds = sum(float(n) * _UNITS[u.lower()] for n, u in _DURATION_RE.findall(cleaned))
    if seconds <= 0:
        raise ValueError(f"{text!r}: a duration must be longer than 0")
    return seconds


def default_path() -> Path:
    return paths.state_dir() / "grants.sqlite3"


class GrantStore:
    """The grants file. Cheap to create; the file is opened only when used."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_path()
        self._stamp: tuple[int, int] | None = None
        self._read_at = 0.0
        self._cached: list[Grant] = []

    def _connect(self, create: bool = False) -> Any:
        import sqlite3

        if create:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not self.path.exists():
                fd = os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600)
                os.close(fd)
        conn = sqlite3.connect(self.path, timeout=5.0)
        conn.execute(_SCHEMA)
        return conn

    def add(self, kind: str, pattern: str, session: str | None = None,
            duration: float | None = None, reason: str | None = None,
            created_by: str = "operator") -> Grant:
        """Store a grant after checking its pattern compiles for its kind."""
        from .policy.rules import KINDS, compile_matcher

        if kind not in KINDS:
            raise ConfigError(f"unknown kind {kind!r} (accepted: {', '.join(KINDS)})")
        try:
            compile_matcher(kind, pattern, os.path.expanduser("~"))
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        now = time.time()
        grant = Grant(f"g-{secrets.token_hex(4)}", kind, pattern, session or None, now,
                      now + duration if duration else None, reason, created_by)
        with self._connect(create=True) as conn:
            conn.execute("INSERT INTO grants VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (grant.id, grant.kind, grant.pattern, grant.session,
                          grant.created_at, grant.expires_at, grant.reason, grant.created_by))
        conn.close()
        self._stamp = None
        return grant

    def revoke(self, grant_id: str) -> bool:
        if not self.path.exists():
            return False
        with self._connect() as conn:
            count = conn.execute("DELETE FROM grants WHERE id = ?", (grant_id,)).rowcount
        conn.close()
        self._stamp = None
        return count > 0

    def all(self) -> list[Grant]:
        if not self.path.exists():
            return []
        with self._connect() as conn:
            rows = conn.execute("SELECT id, kind, pattern, session, created_at, expires_at, "
                                "reason, created_by FROM grants ORDER BY created_at").fetchall()
        conn.close()
        return [Grant(*row) for row in rows]

    def active(self, now: float | None = None) -> list[Grant]:
        """Unexpired grants; re-reads the file when it changed (or after a second)."""
        try:
            st = os.stat(self.path)
        except OSError:
            self._stamp, self._cached = None, []
            return []
        now = now or time.time()
        stamp = (st.st_mtime_ns, st.st_size)
        # The file's timestamp can miss two writes in one clock tick: re-read every second.
        if stamp != self._stamp or now - self._read_at > _MAX_AGE:
            self._cached = self.all()
            self._stamp, self._read_at = stamp, now
        return [g for g in self._cached if g.active(now)]

    def purge_expired(self) -> int:
        if not self.path.exists():
            return 0
        with self._connect() as conn:
            count = conn.execute("DELETE FROM grants WHERE expires_at IS NOT NULL AND "
                                 "expires_at <= ?", (time.time(),)).rowcount
        conn.close()
        self._stamp = None
        return count
