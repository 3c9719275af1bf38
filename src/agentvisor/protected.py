"""Built-in lists of paths that sandboxes and file tools treat specially (data, not logic).

`PROTECTED_PATHS` are never visible inside a sandbox: not mounted, masked where a
mount would otherwise expose them. ``sandbox.protected_paths`` extends the list.

`RUNS_CODE_LATER` are workspace-relative paths that make the host run code at some
later moment (a git hook at the next commit, direnv on the next ``cd``). Inside the
workspace they stay read-only, also when they do not exist yet.
``sandbox.readonly_paths`` extends the list. A trailing ``/`` marks a directory.
"""

from __future__ import annotations

from pathlib import Path

from . import paths

PROTECTED_PATHS: tuple[str, ...] = (
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.kube",
    "~/.docker",
    "~/.config/gh",
    "~/.config/gcloud",
    "~/.azure",
    "~/.netrc",
    "~/.git-credentials",
    "~/.npmrc",
    "~/.pypirc",
    "~/.hermes",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/ssh",
    "/var/run/docker.sock",
    "/run/docker.sock",
)

RUNS_CODE_LATER: tuple[str, ...] = (
    ".git/hooks/",
    ".git/config",
    ".envrc",
    ".vscode/settings.json",
    ".vscode/tasks.json",
)


def expand(path: str, home: Path | None = None) -> Path:
    """Expand ``~/`` against ``home`` and normalise, without touching the filesystem."""
    home = home or Path.home()
    if path == "~" or path.startswith("~/"):
        path = str(home) + path[1:]
    return Path(Path(path).as_posix())


def protected_paths(extra: list[str] | tuple[str, ...] = ()) -> list[Path]:
    """Every protected path: built-in, agentvisor's own directories, and ``extra``."""
    result = [expand(p) for p in (*PROTECTED_PATHS, *extra)]
    result.extend(paths.own_private_dirs())
    return result
