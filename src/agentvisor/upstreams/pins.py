"""Tool pinning: an upstream tool's description and schema are trusted as first seen.

A server that later changes what a tool says it does (a "rug pull": a description that
now tells the model to read ~/.ssh, a schema with a new ``notes`` field to carry data
out) gets that tool held: the gateway refuses it until the operator has looked at the
new text and re-pinned it (``agentvisor upstreams pin``). The store keeps, per tool, the
pinned SHA-256 and, while held, the changed text, so the operator reviews exactly what
they approve; a second change after that review is held again.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

from .. import paths
from ..errors import ConfigError
from ..records import Declared

PINS_FILE = "upstream-pins.json"


class ToolText(Declared):
    """What a server says about one tool: the part a model reads and acts on."""

    name: str
    description: str
    input_schema: dict[str, Any]

    @property
    def digest(self) -> str:
        canonical = json.dumps(
            {"name": self.name, "description": self.description, "schema": self.input_schema},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )
        return hashlib.sha256(canonical.encode()).hexdigest()


class PinCheck(Declared):
    """The outcome for one tool: ``pinned`` now (first use), ``match`` or ``held``."""

    status: str
    pinned: str
    seen: str


class PinStore:
    """``upstream-pins.json`` in the state directory; written atomically, read per check."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    @classmethod
    def default(cls) -> PinStore:
        return cls(paths.state_dir() / PINS_FILE)

    def load(self) -> dict[str, dict[str, dict[str, Any]]]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{self.path}: cannot read the upstream pins: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"{self.path}: not a pin store (expected a JSON object)")
        return data

    def check(self, server: str, tool: ToolText) -> PinCheck:
        """Pin at first use; else compare, and remember a changed text for review."""
        seen = tool.digest
        with self._lock:
            data = self.load()
            entry = data.setdefault(server, {}).get(tool.name)
            if entry is None:
                data[server][tool.name] = {"sha256": seen, "pinned_at": _now()}
                self._save(data)
                return PinCheck(status="pinned", pinned=seen, seen=seen)
            pinned = str(entry.get("sha256"))
            if pinned == seen:
                if "held" in entry:
                    del entry["held"]
                    self._save(data)
                return PinCheck(status="match", pinned=pinned, seen=seen)
            held = entry.get("held") or {}
            if held.get("sha256") != seen:
                entry["held"] = {
                    "sha256": seen,
                    "seen_at": _now(),
                    "description": tool.description,
                    "input_schema": tool.input_schema,
                }
                self._save(data)
            return PinCheck(status="held", pinned=pinned, seen=seen)

    def approve(self, server: str, tool: str | None = None) -> list[str]:
        """The operator accepts the held text of one tool, or of every held tool of a server."""
        with self._lock:
            data = self.load()
            tools = data.get(server)
            if tools is None:
                raise ConfigError(f"no pins for an upstream server named {server!r}")
            names = [tool] if tool else [name for name, e in tools.items() if "held" in e]
            approved = []
            for name in names:
                entry = tools.get(name)
                if entry is None or "held" not in entry:
                    raise ConfigError(f"{server}__{name} is not held: nothing to approve")
                entry["sha256"] = entry.pop("held")["sha256"]
                entry["pinned_at"] = _now()
                approved.append(name)
            self._save(data)
            return approved

    def _save(self, data: dict[str, Any]) -> None:
        paths.write_atomically(self.path, json.dumps(data, indent=1, sort_keys=True))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
