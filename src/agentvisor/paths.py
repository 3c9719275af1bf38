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


def _xdg(var: str, fallback: str, environ: Mapping[str, str] | None = None) -> Path:
    """``$var``, else ``~/fallback``, in ``environ`` (default: this process's)."""
    env = os.environ if environ is None else environ
    value = env.get(var, "")
    # The spec says relative values are invalid and must be ignored.
    if value and os.path.isabs(value):
        return Path(value)
    home = env.get("HOME", "") if environ is not None else ""
    return (Path(home) if os.path.isabs(home) else Path.home()) / fallback


def config_dir(environ: Mapping[str, str] | None = None) -> Path:
    return _xdg("XDG_CONFIG_HOME", ".config", environ) / "agentvisor"


def state_dir(environ: Mapping[str, str] | None = None) -> Path:
    return _xdg("XDG_STATE_HOME", ".local/state", environ) / "agentvisor"


def data_dir() -> Path:
    """Data agentvisor keeps for what it runs (a harness's own state): not protected,
    since sandboxes mount parts of it."""
    return _xdg("XDG_DATA_HOME", ".local/share") / "agentvisor"


def cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    return _xdg("XDG_CACHE_HOME", ".cache", environ) / "agentvisor"


def runtime_dir(environ: Mapping[str, str] | None = None) -> Path:
    """Sockets of a running gateway: ``$XDG_RUNTIME_DIR/agentvisor``, else the state dir."""
    env = os.environ if environ is None else environ
    value = env.get("XDG_RUNTIME_DIR", "")
    if value and os.path.isabs(value):
        return Path(value) / "agentvisor"
    return state_dir(environ)


def user_config_file(environ: Mapping[str, str] | None = None) -> Path:
    return config_dir(environ) / "config.yaml"


def own_private_dirs(caller: Mapping[str, str] | None = None) -> list[Path]:
    """agentvisor's config, state, cache and sockets: protected from every sandbox. With
    ``caller`` (the environment of another process, which the exec helper serves), also
    those that environment points at: that caller's config is read from there by the
    helper, and its own runs (once the helper is gone) keep their grants, caches and socket
    there."""
    own = [config_dir(), state_dir(), cache_dir(), runtime_dir()]
    if caller is None:
        return own
    theirs = [config_dir(caller), state_dir(caller), cache_dir(caller), runtime_dir(caller)]
    return [*own, *(d for d in theirs if d not in own)]


def write_atomically(path: Path, data: str | bytes) -> None:
    """Replace ``path`` whole: written beside it and renamed into place, so a reader or a
    killed writer never leaves half a file. A missing parent is made private (0700)."""
    import tempfile  # only when writing: most starts only read

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data.encode() if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
