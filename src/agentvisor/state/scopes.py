"""Session task scopes a person declared: ``session-scopes.json`` in the state directory.

The flow guard lets a value out of a session when the person named it (a recipient, a
host, an account, the words of their request). A person declares that on the host, with
``agentvisor scope SESSION --add recipient=...``; the gateway reads this file before each
check that needs it. Like grants and upstream pins, it lives in the state directory,
which no sandbox mounts, and no tool an agent can call writes it: the agent never widens
its own scope.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

from .. import paths
from ..errors import ConfigError

SCOPES_FILE = "session-scopes.json"
# What a person can name: the keys of a scope entry.
FIELDS = ("recipient", "host", "account", "request")

Scope = dict[str, list[str]]


class ScopeStore:
    """The declared scopes by session id; re-read when the file changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._seen: tuple[int, int] | None = None
        self._cached: dict[str, Scope] = {}

    @classmethod
    def default(cls) -> ScopeStore:
        return cls(paths.state_dir() / SCOPES_FILE)

    def get(self, session: str) -> Scope:
        """The scope declared for ``session`` (empty when none was)."""
        with self._lock:
            try:
                stat = self.path.stat()
            except FileNotFoundError:
                return {}
            # The file is replaced whole by every write: its inode and mtime tell a change.
            seen = (stat.st_ino, stat.st_mtime_ns)
            if seen != self._seen:
                self._cached, self._seen = self.load(), seen
            return self._cached.get(session, {})

    def load(self) -> dict[str, Scope]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{self.path}: cannot read the session scopes: {exc}") from None
        if not isinstance(data, dict) or not all(
            isinstance(scope, dict)
            and all(k in FIELDS and isinstance(v, list) for k, v in scope.items())
            for scope in data.values()
        ):
            raise ConfigError(
                f"{self.path}: not a session scope file (expected "
                f"{{SESSION: {{{'|'.join(FIELDS)}: [VALUE, ...]}}}})"
            )
        return data

    def add(self, session: str, field: str, values: list[str]) -> Scope:
        """Add values to one field of a session's scope; returns the session's scope."""
        if field not in FIELDS:
            raise ConfigError(f"unknown scope field {field!r} (use one of {', '.join(FIELDS)})")
        with self._lock:
            data = self.load()
            scope = data.setdefault(session, {})
            known = scope.setdefault(field, [])
            known.extend(v for v in values if v not in known)
            self._save(data)
            return scope

    def clear(self, session: str) -> bool:
        """Forget a session's declared scope; False when it had none."""
        with self._lock:
            data = self.load()
            if data.pop(session, None) is None:
                return False
            self._save(data)
            return True

    def _save(self, data: dict[str, Scope]) -> None:
        paths.write_atomically(self.path, json.dumps(data, indent=1, sort_keys=True))
