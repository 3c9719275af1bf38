"""What a sandbox can see: the workspace, extra mounts, masked and read-only paths.

This is the backend-neutral part of the filesystem plan. `Layout.for_config` checks
the workspace and mounts against the protected paths, then lists which protected paths
would still be visible through a mount (those get masked) and which "runs code later"
paths inside the workspace must stay read-only. Backends turn it into their own mount
options (bwrap arguments, Docker mounts).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import threading
import zlib
from pathlib import Path

from .. import paths, protected
from ..errors import ConfigError
from ..protected import SYSTEM_DIRS, Mount, parse_mount
from ..records import Declared

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..config import SandboxConfig


class Mask(Declared):
    inside: Path
    is_dir: bool


class Layout:
    def __init__(
        self,
        workspace: Path,
        mounts: list[Mount],
        masks: list[Mask],
        readonly: list[tuple[Path, bool]],
        anchors: list[Mount] | None = None,
    ) -> None:
        self.workspace = workspace
        self.mounts = mounts
        self.masks = masks
        # Writable directories on the way to a mask, each bound onto itself (see `_anchors`).
        self.anchors = anchors or []
        self.readonly = readonly  # (path in the workspace, is a directory) kept read-only
        self.placeholders: list[str] = []  # made on the host, removed later
        self._holds: list[int] = []  # shared locks of this process's users
        self._mutex = threading.Lock()
        self._lock_path: str | None = None

    @classmethod
    def for_config(
        cls,
        cfg: SandboxConfig,
        workspace: Path,
        home: Path,
        caller: Mapping[str, str] | None = None,
    ) -> Layout:
        """``caller``: the environment of the process the sandbox runs for, when it is not
        this one (the exec helper serves many)."""
        workspace = Path(os.path.realpath(workspace))
        if not workspace.is_dir():
            raise ConfigError(f"workspace {workspace} is not a directory")
        own = [Path(os.path.realpath(p)) for p in paths.own_private_dirs(caller)]
        guarded = [
            Path(os.path.realpath(p))
            for p in protected.protected_paths(cfg.protected_paths, caller=caller)
        ]
        _refuse_protected("the workspace", workspace, guarded)
        if str(workspace) in SYSTEM_DIRS:
            raise ConfigError(f"the workspace cannot be the system directory {workspace}")
        mounts = []
        for index, spec in enumerate(cfg.mounts):
            mount = parse_mount(spec)
            real = Path(os.path.realpath(mount.host))
            if not real.exists():
                raise ConfigError(f"sandbox.mounts[{index}]: {mount.host} does not exist")
            _refuse_protected(f"sandbox.mounts[{index}]", real, guarded)
            if mount.writable and str(real) in SYSTEM_DIRS:
                raise ConfigError(f"sandbox.mounts[{index}]: {real} cannot be mounted writable")
            mounts.append(Mount(host=real, inside=mount.inside, writable=mount.writable))
        writable = [(workspace, workspace)] + [(m.host, m.inside) for m in mounts if m.writable]
        _make_own_dirs(own, writable)
        sources = [(workspace, workspace)] + [(m.host, m.inside) for m in mounts]
        sources += [(Path(d), Path(d)) for d in SYSTEM_BINDS if os.path.isdir(d)]
        masks = _masks(guarded, sources)
        readonly_rel = (
            *protected.RUNS_CODE_LATER,
            *protected.installation_inside(str(workspace)),
            *cfg.readonly_paths,
        )
        return cls(
            workspace=workspace,
            mounts=mounts,
            masks=masks,
            readonly=[(workspace / rel.rstrip("/"), rel.endswith("/")) for rel in readonly_rel],
            anchors=_anchors(guarded, writable),
        )

    def make_placeholders(self) -> None:
        """Create missing read-only paths on the host so they can be mounted read-only.

        A path that does not exist yet must not be creatable either; a bind mount needs
        something to cover, so an empty file or directory stands in until `cleanup`.
        """
        # Every user of the workspace's stand-ins (in any process) holds a shared lock
        # until its sandbox ends; only the last one removes them. Removing a stand-in that
        # another sandbox still has mounted would detach that mount, and the path would
        # become writable in there.
        hold = self._lock_file()
        fcntl.flock(hold, fcntl.LOCK_SH)
        with self._mutex:
            self._holds.append(hold)
            for cover, is_dir in self._covers():
                if not os.path.lexists(cover):
                    if is_dir:
                        os.mkdir(cover)
                    else:
                        os.close(os.open(cover, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
                    self.placeholders.append(cover)

    def readonly_binds(self) -> tuple[list[str], list[str]]:
        """(directories to bind onto themselves, paths to bind read-only), in mount order.

        The self-binds turn each parent directory (``.git``) into a mount point, which
        cannot be renamed away and replaced by a fresh one with a planted hook inside.
        """
        workspace = str(self.workspace)
        parents: list[str] = []
        readonly: list[str] = []
        for cover, _ in self._covers():
            if not os.path.lexists(cover):
                continue  # no stand-in yet (a dry run): nothing to mount
            names = cover[len(workspace) + 1 :].split("/")
            for depth in range(1, len(names)):
                directory = os.path.join(workspace, *names[:depth])
                if directory not in parents:
                    parents.append(directory)
            readonly.append(cover)
        return parents, readonly

    def _covers(self) -> list[tuple[str, bool]]:
        """The paths to mount read-only (and whether a stand-in would be a directory).

        A missing or *empty* directory on the way to an entry is covered whole: one
        read-only mount for all of ``.vscode/*``; and the answer is the same before and
        after the stand-in exists (it is empty), so every process and every run agrees.
        Plain os calls on strings: this runs for every command, and pathlib costs here
        were a tenth of a sandbox start.
        """
        workspace = str(self.workspace)
        covers: list[tuple[str, bool]] = []
        for target, is_dir in self.readonly:
            cover = _cover(workspace, str(target), is_dir)
            if cover not in covers:
                covers.append(cover)
        return [
            (path, d)
            for path, d in covers
            if not any(path.startswith(other + "/") for other, _ in covers)
        ]

    def cleanup(self) -> None:
        """Release this user's hold; the last user removes the stand-ins this process
        made that are still empty, deepest first."""
        with self._mutex:
            if self._holds:
                os.close(self._holds.pop())
            if self._holds or not self.placeholders:
                return
            probe = self._lock_file()
            try:
                try:
                    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    return  # another process's sandbox still uses them; they stay for now
                for path in reversed(self.placeholders):
                    _remove_if_empty(path)
                self.placeholders.clear()
            finally:
                os.close(probe)

    def _lock_file(self) -> int:
        if self._lock_path is None:
            directory = paths.state_dir() / "locks"
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            name = f"workspace-{zlib.crc32(str(self.workspace).encode()):08x}.lock"
            self._lock_path = str(directory / name)
        return os.open(self._lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _cover(workspace: str, target: str, is_dir: bool) -> tuple[str, bool]:
    """What to mount read-only so that ``target`` stays read-only (see `Layout._covers`)."""
    directory = workspace
    for name in target[len(workspace) + 1 :].split("/")[:-1]:
        directory = os.path.join(directory, name)
        try:
            mode = os.lstat(directory).st_mode
        except FileNotFoundError:
            return directory, True
        if stat.S_ISLNK(mode):
            raise ConfigError(
                f"{directory} is a symbolic link; agentvisor cannot keep "
                f"{os.path.relpath(target, workspace)} read-only behind it"
            )
        if not stat.S_ISDIR(mode):
            return directory, False  # e.g. the `.git` file of a worktree
        if _empty_dir(directory):
            return directory, True
    if os.path.islink(target):
        raise ConfigError(
            f"{target} is a symbolic link; agentvisor cannot keep it read-only. "
            "Replace it with a regular file or remove it from sandbox.readonly_paths"
        )
    return target, is_dir


def _remove_if_empty(path: str) -> None:
    with contextlib.suppress(OSError):
        mode = os.lstat(path)
        if stat.S_ISDIR(mode.st_mode):
            os.rmdir(path)  # fails unless empty
        elif stat.S_ISREG(mode.st_mode) and mode.st_size == 0:
            os.unlink(path)


SYSTEM_BINDS = protected.SYSTEM_BINDS


def _empty_dir(path: str) -> bool:
    with os.scandir(path) as entries:
        return next(entries, None) is None


def _refuse_protected(what: str, path: Path, guarded: list[Path]) -> None:
    for p in guarded:
        if path == p or p in path.parents:
            raise ConfigError(f"{what} {path} is inside the protected path {p}")


def _make_own_dirs(own: list[Path], writable: list[tuple[Path, Path]]) -> None:
    """Create agentvisor's own config, state, cache and runtime directories that lie in a
    writable mount (a workspace that is the home directory): one that does not exist is not
    masked, and a sandboxed command could create it, with an operator config (``backend:
    local``) or trust pins in it that the next run on the host obeys."""
    for directory in own:
        if any(host == directory or host in directory.parents for host, _ in writable):
            # Where this process may not create it, neither may the sandbox, which never
            # has more rights than its caller.
            with contextlib.suppress(OSError):
                directory.mkdir(parents=True, exist_ok=True, mode=0o700)


def _anchors(guarded: list[Path], writable: list[tuple[Path, Path]]) -> list[Mount]:
    """The directories between a writable mount and a protected path in it, shallowest
    first, to bind onto themselves: a mount point cannot be renamed, so a sandboxed command
    cannot move ``~/.config`` aside (the mask over ``~/.config/agentvisor`` moves with it)
    and create a fresh ``~/.config/agentvisor/config.yaml`` in its place."""
    anchors: list[Mount] = []
    for p in guarded:
        if not os.path.lexists(p):
            continue
        for host, inside in writable:
            if host not in p.parents:
                continue
            for directory in reversed(p.parents):
                if host in directory.parents:
                    spot = inside / directory.relative_to(host)
                    anchor = Mount(host=directory, inside=spot, writable=True)
                    if anchor not in anchors:
                        anchors.append(anchor)
    return sorted(anchors, key=lambda a: len(a.inside.parts))


def _masks(guarded: list[Path], sources: list[tuple[Path, Path]]) -> list[Mask]:
    """Protected paths that some mount would expose, translated to inside paths."""
    masks = []
    seen = set()
    for p in guarded:
        if not os.path.lexists(p):
            continue
        for host, inside in sources:
            if host == p or host in p.parents:
                spot = inside / p.relative_to(host)
                if spot not in seen:
                    seen.add(spot)
                    masks.append(Mask(inside=spot, is_dir=p.is_dir()))
    return masks
