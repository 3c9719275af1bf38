"""Project files the operator trusted: `agentvisor trust FILE` (as direnv's ``allow``).

A pin is the file's absolute path and the SHA-256 of its content, kept in the operator's
state directory (which no sandbox sees). A file whose content changed is untrusted again
until the operator trusts it anew.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from .. import paths
from ..errors import ConfigError

PINS_FILE = "trusted-configs.json"


def content_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pins() -> dict[str, str]:
    """Trusted files: absolute path -> SHA-256 of the content the operator trusted."""
    path = paths.state_dir() / PINS_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the trusted config files: {exc}") from None
    if not isinstance(data, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in data.items()
    ):
        raise ConfigError(f"{path}: not a list of trusted config files; remove it to start over")
    return data


def is_trusted(path: Path, content: bytes) -> bool:
    return pins().get(os.path.abspath(path)) == content_hash(content)


def pin(path: Path, content: bytes) -> None:
    """Trust ``path`` with exactly ``content`` (what the operator was shown)."""
    _save({**pins(), os.path.abspath(path): content_hash(content)})


def unpin(path: Path) -> bool:
    """Stop trusting ``path``; False when it was not trusted."""
    current = pins()
    if current.pop(os.path.abspath(path), None) is None:
        return False
    _save(current)
    return True


def _save(entries: dict[str, str]) -> None:
    text = json.dumps(dict(sorted(entries.items())), indent=1)
    paths.write_atomically(paths.state_dir() / PINS_FILE, text)
