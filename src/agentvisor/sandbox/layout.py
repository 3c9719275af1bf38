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
import threading
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from .. import paths, protected
from ..config import Mount, SandboxConfig, parse_mount
from ..errors import ConfigError

# Host directories that a workspace or a writable mount must never be.
SYSTEM_DIRS = ("/", "/usr", "/bin", "/sbin", "/lib", "/lib64", "/etc", "/boot", "/dev",
               "/proc", "/sys", "/var", "/run", "/opt")


@dataclass(frozen=True)
class Mask:
    inside: Path
    is_dir: bool


@dataclass
class Layout:
    workspace: Path
    mounts: list[Mount]
    masks: list[Mask]
    readonly: list[tuple[Path, bool]]  # (path in the workspace, is a directory) kept read-only
    placeholders: list[Path] = field(default_factory=list)  # made on the host, removed later
    _holds: list[int] = field(default_factory=list)  # shared locks of this process's users
    _mutex: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def for_config(cls, cfg: SandboxConfig, workspace: Path, home: Path) -> Layout:
        workspace = Path(os.path.realpath(workspace))
        if not workspace.is_dir():
            raise ConfigError(f"workspace {workspace} is not a directory")
        guarded = [Path(os.path.realpath(p)) for p in
                   protected.protected_paths(cfg.protected_paths)]
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
        sources = [(workspace, workspace)] + [(m.host, m.inside) for m in mounts]
        sources += [(Path(d), Path(d)) for d in SYSTEM_BINDS if os.path.isdir(d)]
        masks = _masks(guarded, sources)
        readonly_rel = (*protected.RUNS_CODE_LATER, *cfg.readonly_paths)
        return cls(workspace=workspace, mounts=mounts, masks=masks,
                   readonly=[(workspace / rel.rstrip("/"), rel.endswith("/"))
                             for rel in readonly_rel],
                   placeholders=[])

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
                        cover.mkdir()
                    else:
                        cover.touch(exist_ok=False)
                    self.placeholders.append(cover)

    def readonly_binds(self) -> tuple[list[Path], list[Path]]:
        """(directories to bind onto themselves, paths to bind read-only), in mount order.

        The self-binds turn each parent directory (``.git``) into a mount point, which
        cannot be renamed away and replaced by a fresh one with a planted hook inside.
        """
        parents: list[Path] = []
        readonly: list[Path] = []
        for cover, _ in self._covers():
            if not os.path.lexists(cover):
                continue  # no stand-in yet (a dry run): nothing to mount
            for parent in reversed(cover.relative_to(self.workspace).parents[:-1]):
                directory = self.workspace / parent
                if directory not in parents:
                    parents.append(directory)
            readonly.append(cover)
        return parents, readonly

    def _covers(self) -> list[tuple[Path, bool]]:
        """The paths to mount read-only (and whether a stand-in would be a directory).

        A missing or *empty* directory on the way to an entry is covered whole: one
        read-only mount for all of ``.vscode/*``; and the answer is the same before and
        after the stand-in exists (it is empty), so every process and every run agrees.
        """
        covers: list[tuple[Path, bool]] = []
        for target, is_dir in self.readonly:
            cover = self._cover(target, is_dir)
            if cover not in covers:
                covers.append(cover)
        return [(path, d) for path, d in covers
                if not any(other in path.parents for other, _ in covers)]

    def _cover(self, target: Path, is_dir: bool) -> tuple[Path, bool]:
        for parent in reversed(target.relative_to(self.workspace).parents[:-1]):
            directory = self.workspace / parent
            if directory.is_symlink():
                raise ConfigError(
                    f"{directory} is a symbolic link; agentvisor cannot keep "
                    f"{target.relative_to(self.workspace)} read-only behind it")
            if not os.path.lexists(directory) or _empty_dir(directory):
                return directory, True
            if not directory.is_dir():
                return directory, False  # e.g. the `.git` file of a worktree
        if target.is_symlink():
            raise ConfigError(
                f"{target} is a symbolic link; agentvisor cannot keep it read-only. "
                "Replace it with a regular file or remove it from sandbox.readonly_paths")
        return target, is_dir

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
                    with contextlib.suppress(OSError):
                        if path.is_dir() and not path.is_symlink():
                            path.rmdir()
                        elif path.is_file() and path.stat().st_size == 0:
                            path.unlink()
                self.placeholders.clear()
            finally:
                os.close(probe)

    def _lock_file(self) -> int:
        directory = paths.state_dir() / "locks"
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = f"workspace-{zlib.crc32(str(self.workspace).encode()):08x}.lock"
        return os.open(directory / name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


SYSTEM_BINDS = protected.SYSTEM_BINDS


def _empty_dir(path: Path) -> bool:
    if not path.is_dir():
        return False
    with os.scandir(path) as entries:
        return next(entries, None) is None


def _refuse_protected(what: str, path: Path, guarded: list[Path]) -> None:
    for p in guarded:
        if path == p or p in path.parents:
            raise ConfigError(f"{what} {path} is inside the protected path {p}")


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
