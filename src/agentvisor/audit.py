"""The audit log: one event per tool call, decision, approval and sandbox lifecycle change.

`AuditLog` is the interface the gateway writes through. `SQLiteAuditLog` keeps events in
a SQLite file under the XDG state directory (WAL mode; each event is committed before
the call returns to the agent, so a crash never loses a call the agent saw complete).
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from . import paths


@dataclass
class AuditEvent:
    kind: str  # "call" | "approval" | "grant" | "sandbox"
    session: str | None = None
    agent: str | None = None
    tool: str | None = None
    arguments: dict[str, Any] | None = None  # secrets already redacted
    decision: str | None = None
    rule: str | None = None
    reason: str | None = None
    approver: str | None = None
    result: str | None = None  # a short summary
    duration: float | None = None
    time: float = field(default_factory=time.time)


class AuditLog(Protocol):
    def record(self, event: AuditEvent) -> None: ...

    def events(self, *, session: str | None = None, limit: int = 1000) -> list[AuditEvent]: ...


class SQLiteAuditLog:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or paths.state_dir() / "audit.db"
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, time REAL, kind TEXT, "
            "session TEXT, agent TEXT, tool TEXT, arguments TEXT, decision TEXT, rule TEXT, "
            "reason TEXT, approver TEXT, result TEXT, duration REAL)")

    def record(self, event: AuditEvent) -> None:
        row = asdict(event)
        row["arguments"] = json.dumps(event.arguments) if event.arguments is not None else None
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self._lock:
            self._db.execute(f"INSERT INTO events ({columns}) VALUES ({marks})",
                             tuple(row.values()))

    def events(self, *, session: str | None = None, limit: int = 1000) -> list[AuditEvent]:
        names = [f.name for f in AuditEvent.__dataclass_fields__.values()]
        query = f"SELECT {', '.join(names)} FROM events"
        params: tuple[Any, ...] = ()
        if session is not None:
            query += " WHERE session = ?"
            params = (session,)
        query += " ORDER BY id DESC LIMIT ?"
        with self._lock:
            rows = self._db.execute(query, (*params, limit)).fetchall()
        out = []
        for row in reversed(rows):
            values = dict(zip(names, row, strict=True))
            if values["arguments"] is not None:
                values["arguments"] = json.loads(values["arguments"])
            out.append(AuditEvent(**values))
        return out

    def close(self) -> None:
        with self._lock:
            self._db.close()
