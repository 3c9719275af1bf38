"""Where agentvisor keeps its own files, following the XDG base directory spec.

These directories hold the operator's config, grants, audit log and secrets, so every
sandbox backend treats them as protected paths: never mounted, never readable inside.
"""

from __future__ import annotations

import os
from pathlib import Path

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from collections.abc import Mapping


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


def data_dir() -> Path:
    """Data agentvisor keeps for what it runs (a harness's own state): not protected,
    since sandboxes mount parts of it."""
    return _xdg("XDG_DATA_HOME", ".local/share") / "agentvisor"


def cache_dir() -> Path:
    return _xdg("XDG_CACHE_HOME", ".cache") / "agentvisor"


def runtime_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Sockets of a running gateway: ``$XDG_RUNTIME_DIR/agentvisor``, else the state dir."""
    env = os.environ if environ is None else environ
    value = env.get("XDG_RUNTIME_DIR", "")
    if value and os.path.isabs(value):
        return Path(value) / "agentvisor"
    if environ is None:
        return state_dir()
    state = env.get("XDG_STATE_HOME", "")
    if state and os.path.isabs(state):
        return Path(state) / "agentvisor"
    return Path(env.get("HOME") or Path.home()) / ".local" / "state" / "agentvisor"


def user_config_file(environ: Mapping[str, str] | None = None) -> Path:
    if environ is None:
        return config_dir() / "config.yaml"
    value = environ.get("XDG_CONFIG_HOME", "")
    base = (
        Path(value)
        if value and os.path.isabs(value)
        else Path(environ.get("HOME") or Path.home()) / ".config"
    )
    return base / "agentvisor" / "config.yaml"


def own_private_dirs(caller: Mapping[str, str] | None = None) -> list[Path]:
    """agentvisor's config, state and cache: protected from every sandbox. With ``caller``
    (the environment of another process, which the exec helper serves), also the config
    directory and the exec socket's directory that environment points at: that caller's
    config is read from there, and its next `exec` connects there."""
    own = [config_dir(), state_dir(), cache_dir(), runtime_dir()]
    if caller is None:
        return own
    return [*own, user_config_file(caller).parent, runtime_dir(caller)]
