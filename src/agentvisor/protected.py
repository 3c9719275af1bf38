"""Built-in lists of paths that sandboxes and file tools treat specially (data, not logic),
and the mount specs (``HOST:INSIDE[:ro|rw]``) that add paths to a sandbox's view.

`PROTECTED_PATHS` are never visible inside a sandbox: not mounted, masked where a
mount would otherwise expose them. ``sandbox.protected_paths`` extends the list.

`RUNS_CODE_LATER` are workspace-relative paths that make the host run code at some
later moment (a git hook at the next commit, direnv on the next ``cd``) or widen what
agentvisor allows (``./agentvisor.yaml`` is a config file agentvisor reads). Inside the
workspace they stay read-only, also when they do not exist yet. ``sandbox.readonly_paths``
extends the list. A trailing ``/`` marks an entry whose stand-in, while it does not exist,
is a directory (for ``agentvisor.yaml``: a directory is not a config file, so the stand-in
never shadows the user's own config).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import paths
from .errors import ConfigError
from .records import Declared

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from collections.abc import Mapping

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
    "agentvisor.yaml/",
    ".vscode/settings.json",
    ".vscode/tasks.json",
)


def own_installation() -> tuple[list[str], list[str]]:
    """Where the code this host process runs comes from: (its interpreter's prefixes
    (``bin/python``, ``pyvenv.cfg``, site-packages and their ``.pth`` files) and
    agentvisor's own package directory, the other directories on its import path (an
    editable install's ``src/``, where a planted ``sitecustomize.py`` would run too)).
    Later agentvisor processes run from the same places."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = _real([sys.prefix, sys.exec_prefix, sys.base_prefix, package])
    return trees, [p for p in _real([*sys.path, *_user_site()]) if p not in trees]


def _user_site() -> list[str]:
    """The user site-packages directory (``~/.local/lib/pythonX.Y/site-packages``), when
    this interpreter adds it at start: outside a virtualenv that leaves it out. Python
    runs its ``.pth`` files at every start of the CLI, also when it did not exist at the
    last one, so it is protected before it exists. Judged from the installation, not from
    this process (the exec helper runs isolated, without it; the CLI does not)."""
    import site

    if sys.prefix != sys.base_prefix and not _venv_includes_system_site():
        return []
    return [site.getusersitepackages()]


def _venv_includes_system_site() -> bool:
    try:
        with open(os.path.join(sys.prefix, "pyvenv.cfg"), encoding="utf-8") as cfg:
            lines = cfg.read().splitlines()
    except OSError:
        return False
    return any(
        key.strip() == "include-system-site-packages" and value.strip().lower() == "true"
        for key, _, value in (line.partition("=") for line in lines)
    )


def _real(paths: list[str]) -> list[str]:
    return sorted({os.path.realpath(p) for p in paths if p and os.path.isabs(p)})


def installation_inside(workspace: str) -> tuple[str, ...]:
    """`own_installation` directories inside ``workspace``, as `RUNS_CODE_LATER` entries
    (workspace-relative, trailing ``/``): the host imports and runs what is there, so they
    stay read-only for agents. A workspace inside a prefix, or on the import path itself
    (any module planted there would be imported), is refused: it could not be writable.
    A workspace below an import path directory is not: only that directory's own entries
    are importable (a script's directory is first on its import path)."""
    workspace = os.path.realpath(workspace)
    trees, imports = own_installation()
    for directory in [*trees, *imports]:
        inside = workspace.startswith(directory.rstrip("/") + "/") and directory in trees
        if workspace == directory or inside:
            raise ConfigError(
                f"the workspace {workspace} is inside {directory}, where agentvisor's own "
                "installation is loaded from on the host; choose another workspace"
            )
    return tuple(
        directory[len(workspace) + 1 :] + "/"
        for directory in [*trees, *imports]
        if directory.startswith(workspace + "/")
    )


# The system directories (and /, /home, /root), one list for every layer: the policy puts
# recursive deletes and permission changes of these (or of what a glob in them covers) on
# the hardline floor.
SYSTEM_DIRS: frozenset[str] = frozenset(
    {
        "/",
        "/bin",
        "/boot",
        "/dev",
        "/etc",
        "/home",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/media",
        "/mnt",
        "/opt",
        "/proc",
        "/root",
        "/run",
        "/sbin",
        "/srv",
        "/sys",
        "/usr",
        "/var",
        "/snap",
        "/usr/bin",
        "/usr/sbin",
        "/usr/lib",
        "/usr/lib32",
        "/usr/lib64",
        "/usr/libexec",
        "/usr/include",
        "/usr/share",
        "/usr/local",
        "/usr/local/bin",
        "/usr/local/lib",
        "/usr/local/sbin",
        "/usr/src",
        "/var/lib",
        "/var/log",
        "/var/cache",
        "/var/spool",
        "/var/mail",
        "/var/backups",
        "/var/opt",
        "/var/www",
        "/etc/ssl",
        "/boot/efi",
        "/System",
        "/Library",
        "/Applications",
        "/Users",
        "/private",
        "/private/etc",
        "/private/var",
        "/nix",
        "/nix/store",
    }
)


def expand(path: str, home: Path | None = None) -> Path:
    """Expand ``~/`` against ``home`` and normalise, without touching the filesystem."""
    home = home or Path.home()
    if path == "~" or path.startswith("~/"):
        path = str(home) + path[1:]
    return Path(Path(path).as_posix())


# Host directories an isolating sandbox mounts read-only (others, such as /home and /root,
# stay hidden). The bwrap backend binds exactly these.
SYSTEM_BINDS: tuple[str, ...] = (
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/lib32",
    "/libx32",
    "/etc",
    "/opt",
)


def visible_in_sandbox(path: str, roots: list[str], hidden: list[str]) -> bool:
    """Whether an isolating sandbox that mounts ``roots`` and masks ``hidden`` shows ``path``.

    Paths are absolute and normalised; no link is followed (a link inside a root that
    points out of it leads nowhere inside the sandbox either).
    """

    def under(p: str, top: str) -> bool:
        return p == top or p.startswith(top.rstrip("/") + "/")

    if any(under(path, h) for h in hidden):
        return False
    return any(under(path, r) for r in roots)


def protected_paths(
    extra: list[str] | tuple[str, ...] = (),
    home: Path | None = None,
    caller: Mapping[str, str] | None = None,
) -> list[Path]:
    """Every protected path: built-in, agentvisor's own directories (also those of
    ``caller``'s environment, see `paths.own_private_dirs`), and ``extra``. With a
    ``caller`` whose ``HOME`` is another, ``~/`` stands for both homes: the exec helper
    started by one caller serves others, whose keys are in their own ``~/.ssh``."""
    homes = [home or Path.home()]
    caller_home = (caller or {}).get("HOME", "")
    if os.path.isabs(caller_home):
        homes.append(Path(caller_home))
    expanded = (expand(p, h) for h in homes for p in (*PROTECTED_PATHS, *extra))
    return [*dict.fromkeys(expanded), *paths.own_private_dirs(caller)]


class Mount(Declared):
    host: Path
    inside: Path
    writable: bool


def parse_mount(spec: str) -> Mount:
    """``HOST:INSIDE[:ro|rw]``; read-only unless ``rw`` is written."""
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"{spec!r} is not HOST:INSIDE[:ro|rw]")
    mode = parts[2] if len(parts) == 3 else "ro"
    if mode not in ("ro", "rw"):
        raise ValueError(f"{spec!r}: mode must be 'ro' or 'rw', not {mode!r}")
    host = Path(os.path.expanduser(parts[0]))
    inside = Path(parts[1])
    if not host.is_absolute() or not inside.is_absolute():
        raise ValueError(f"{spec!r}: both paths must be absolute (or start with ~/ on the host)")
    return Mount(
        host=Path(os.path.normpath(host)),
        inside=Path(os.path.normpath(inside)),
        writable=mode == "rw",
    )
