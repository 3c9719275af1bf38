"""One database: a SQLAlchemy engine, set up for how agentvisor writes, and migrated on open.

SQLite (the default, a file under the XDG state directory): WAL mode, ``synchronous=FULL``,
every transaction ``BEGIN IMMEDIATE`` so writers queue on the file lock instead of failing
when a read turns into a write. PostgreSQL (``postgresql://...``, driven by psycopg 3): a
small pool; appends to the audit chain serialise on a row lock (see `audit.py`).

`database(url)` returns one `Database` per URL and process, so the audit log, grants and
approvals that share a URL share one engine.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from .. import paths
from ..errors import AgentvisorError
from . import migrate

DEFAULT_FILE = "state.db"
CHANNEL = "agentvisor_state"  # PostgreSQL NOTIFY channel: grants and approvals changed
SQLITE_BUSY_MS = 30_000
_cache: dict[str, Database] = {}
_cache_lock = threading.Lock()


class StateError(AgentvisorError):
    """The audit or state database cannot be opened or written."""


def default_url() -> str:
    return f"sqlite:///{paths.state_dir() / DEFAULT_FILE}"


def normalize_url(url: str | os.PathLike[str]) -> sa.URL:
    """A URL (or a plain file path, taken as SQLite) with the driver agentvisor ships."""
    text = os.fspath(url)
    if "://" not in text:
        text = f"sqlite:///{os.path.abspath(os.path.expanduser(text))}"
    parsed = sa.make_url(text)
    # postgresql:// means psycopg2 to SQLAlchemy; agentvisor depends on psycopg 3.
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise StateError(
            f"{parsed.render_as_string(hide_password=True)}: only sqlite:/// "
            "and postgresql:// URLs are supported"
        )
    return parsed


def database(url: str | os.PathLike[str] | None = None) -> Database:
    """The process-wide `Database` for ``url`` (the default SQLite file when None)."""
    parsed = normalize_url(url if url is not None else default_url())
    key = parsed.render_as_string(hide_password=False)
    with _cache_lock:
        db = _cache.get(key)
        if db is None:
            db = _cache[key] = Database(parsed)
        return db


def instance_id() -> str:
    """Names this process in rows it owns (pending asks, heartbeats): host:pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Database:
    def __init__(self, url: sa.URL) -> None:
        self.url = url
        self.dialect = url.get_backend_name()
        self.shown = url.render_as_string(hide_password=True)
        self._notifier: Notifier | None = None
        if self.dialect == "sqlite":
            self.path: Path | None = Path(url.database or "")
            _create_private(self.path)
            self.engine = sa.create_engine(
                url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_MS / 1000}
            )
            event.listen(self.engine, "connect", _sqlite_connect)
            event.listen(self.engine, "begin", _sqlite_begin)
        else:
            self.path = None
            self.engine = sa.create_engine(url, pool_size=8, max_overflow=16, pool_pre_ping=True)
        try:
            migrate.upgrade(self)
        except sa.exc.SQLAlchemyError as exc:
            raise StateError(f"{self.shown}: cannot open the database: {_short(exc)}") from None

    @property
    def postgres(self) -> bool:
        return self.dialect == "postgresql"

    @contextmanager
    def begin(self) -> Iterator[sa.Connection]:
        """A write transaction; errors become `StateError` naming the database."""
        try:
            with self.engine.begin() as conn:
                yield conn
        except sa.exc.SQLAlchemyError as exc:
            raise StateError(f"{self.shown}: {_short(exc)}") from None

    @contextmanager
    def read(self) -> Iterator[sa.Connection]:
        """A read-only connection: on SQLite a deferred transaction, which never waits for
        or holds up a writer (WAL readers see the last commit)."""
        with self.engine.connect() as conn:
            yield conn.execution_options(agentvisor_read=True)

    def notify(self, conn: sa.Connection, what: str) -> None:
        """Wake every process's `Notifier` when ``conn``'s transaction commits (PostgreSQL;
        SQLite readers poll their change counters instead)."""
        if self.postgres:
            conn.execute(sa.text("SELECT pg_notify(:c, :p)"), {"c": CHANNEL, "p": what})

    def notifier(self) -> Notifier | None:
        """This process's LISTEN connection to the database (PostgreSQL), or None."""
        if not self.postgres:
            return None
        with _cache_lock:
            if self._notifier is None:
                self._notifier = Notifier(self)
            return self._notifier

    def listener(self) -> Any:
        """A dedicated autocommit psycopg connection LISTENing on `CHANNEL`."""
        raw = self.engine.raw_connection()
        raw.detach()  # this connection never goes back to the pool
        dbapi: Any = raw.driver_connection
        dbapi.autocommit = True
        dbapi.execute(f'LISTEN "{CHANNEL}"')
        return dbapi

    def close(self) -> None:
        self.engine.dispose()


class Notifier:
    """One LISTEN connection per database and process (PostgreSQL): a generation number
    that moves on every notification, for waiters and caches to compare."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._cond = threading.Condition()
        self._generation = 0
        self._thread: threading.Thread | None = None

    def generation(self) -> int:
        with self._cond:
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._listen, daemon=True, name="agentvisor-state-listen"
                )
                self._thread.start()
            return self._generation

    def poke(self) -> None:
        """A change committed in this process: local readers need not wait for the NOTIFY."""
        with self._cond:
            self._generation += 1
            self._cond.notify_all()

    def wait(self, seen: int, timeout: float) -> int:
        with self._cond:
            self._cond.wait_for(lambda: self._generation != seen, timeout)
            return self._generation

    def _listen(self) -> None:
        while True:
            try:
                conn = self.db.listener()
                try:
                    while True:
                        for _ in conn.notifies(timeout=30.0, stop_after=1):
                            with self._cond:
                                self._generation += 1
                                self._cond.notify_all()
                finally:
                    conn.close()
            except Exception:  # reconnect; waiters fall back to polling meanwhile
                time.sleep(1.0)


def _create_private(path: Path) -> None:
    """The database holds the audit trail and grants: owner-only, like the state dir."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))


def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
    dbapi_conn.isolation_level = None  # SQLAlchemy's "begin" hook below opens transactions
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_MS}")
    cur.execute("PRAGMA journal_mode=WAL")
    # FULL: a commit survives a power cut too, not only a killed process.
    cur.execute("PRAGMA synchronous=FULL")
    cur.close()


def _sqlite_begin(conn: sa.Connection) -> None:
    # IMMEDIATE takes the write lock up front: a deferred transaction that reads and then
    # writes fails with SQLITE_BUSY at once instead of waiting for busy_timeout.
    read_only = conn.get_execution_options().get("agentvisor_read")
    conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")


def _short(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
