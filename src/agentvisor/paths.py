"""Where agentvisor keeps its own files, following the XDG base directory spec.

These directories hold the operator's config, grants, audit log and secrets, so every
sandbox backend treats them as protected paths: never mounted, never readable inside.
"""

from __future__ import annotations

import os
from pathlib import Path


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var, "")
    # The spec says relative values are invalid and must be ignored.
    if value and os.path.isabs(value):
        return Path(value)
    return Path.home() / fallback


def config_dir() -> Path:
    return _xdg("XDG_CONFIG_HOME", ".config") / "agentvisor"


def state_dir() -> Path:
    return _xdg("XDG_STATE_HOME", ".local/state") / "agentvisor"


def cache_dir() -> Path:
    return _xdg("XDG_CACHE_HOME", ".cache") / "agentvisor"


def user_config_file() -> Path:
    return config_dir() / "config.yaml"


def own_private_dirs() -> list[Path]:
    """agentvisor's config, state and cache: protected from every sandbox."""
    return [config_dir(), state_dir(), cache_dir()]
