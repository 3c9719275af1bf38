"""Idmapped mounts: a host directory seen as owned by the sandbox's unprivileged user.

A root caller's sandbox runs as an unprivileged host uid (see ``identity.py``), but its
workspace usually belongs to root. An idmapped mount (Linux 5.12+, ``mount_setattr`` with
``MOUNT_ATTR_IDMAP``) shows the workspace's owner as that uid, and what the sandbox writes
lands on disk as the owner again: no chown, and nothing the sandbox writes belongs to it
afterwards.

The mount is made detached (``open_tree``), idmapped, then attached at a fresh, unlisted
directory below `STAGING` (0711: traversable, not listable), because bwrap, running as
the unprivileged uid, takes its sources by path. Views are detached by `Staged.release`
(the end of a run) or once unused (`Staged.release_when_unused`: a backend's views of its
workspace); views left by a process that died are detached by the next one.

Python has no wrappers for these system calls and no maintained library offers them, so
they are called through ctypes (their numbers are the same on every architecture).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import stat
import subprocess
import threading
import time
import weakref

from ..errors import SandboxUnavailable

STAGING = "/run/agentvisor/idmap"

_SYS_OPEN_TREE = 428
_SYS_MOVE_MOUNT = 429
_SYS_MOUNT_SETATTR = 442
_AT_FDCWD = -100
_AT_EMPTY_PATH = 0x1000
_AT_RECURSIVE = 0x8000
_OPEN_TREE_CLONE = 1
_MOVE_MOUNT_F_EMPTY_PATH = 0x4
_MOUNT_ATTR_IDMAP = 0x00100000
_MNT_DETACH = 2


class _MountAttr(ctypes.Structure):
    _fields_ = [
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    ]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_userns_lock = threading.Lock()
_userns: dict[tuple[int, int, int, int], int] = {}  # (owner uid, gid, uid, gid) -> fd
_swept = False


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


class Staged:
    """Idmapped views of host directories, attached below `STAGING` until released."""

    def __init__(self) -> None:
        self.paths: dict[str, str] = {}  # host directory -> its idmapped view

    def add(self, source: str, user: tuple[int, int]) -> str:
        """An idmapped view of ``source`` (a directory or a file) where its owner shows
        as ``user`` (uid, gid)."""
        if source in self.paths:
            return self.paths[source]
        info = os.stat(source)
        owner = (info.st_uid, info.st_gid)
        target = _fresh_target(is_dir=stat.S_ISDIR(info.st_mode))
        try:
            tree = _check(
                _libc.syscall(
                    _SYS_OPEN_TREE,
                    _AT_FDCWD,
                    source.encode(),
                    _OPEN_TREE_CLONE | os.O_CLOEXEC | _AT_RECURSIVE,
                ),
                f"open_tree {source}",
            )
            try:
                attr = _MountAttr(_MOUNT_ATTR_IDMAP, 0, 0, _userns_fd(owner, user))
                _check(
                    _libc.syscall(
                        _SYS_MOUNT_SETATTR,
                        tree,
                        b"",
                        _AT_EMPTY_PATH | _AT_RECURSIVE,
                        ctypes.byref(attr),
                        ctypes.sizeof(attr),
                    ),
                    f"idmapping {source}",
                )
                _check(
                    _libc.syscall(
                        _SYS_MOVE_MOUNT,
                        tree,
                        b"",
                        _AT_FDCWD,
                        target.encode(),
                        _MOVE_MOUNT_F_EMPTY_PATH,
                    ),
                    f"attaching {source}",
                )
            finally:
                os.close(tree)
        except OSError as exc:
            _remove(target)
            raise SandboxUnavailable(
                f"cannot give the sandbox user write access to {source} through an "
                f"idmapped mount ({exc}); give that directory to an unprivileged user "
                "(the sandbox then runs as that user); see docs/sandbox.md"
            ) from exc
        self.paths[source] = target
        return target

    def mount_point(self, key: str) -> str:
        """A fresh empty directory below `STAGING` (reachable by the sandbox user) for a
        mount made in another mount namespace; removed with the views."""
        target = _fresh_target(is_dir=True)
        self.paths[key] = target
        return target

    def release(self) -> None:
        """Detach the views (a started sandbox keeps its own copies); idempotent."""
        paths, self.paths = self.paths, {}
        _detach(paths)

    def release_when_unused(self) -> None:
        """Detach the views once nothing refers to this object any more."""
        weakref.finalize(self, _detach, self.paths)


def _detach(paths: dict[str, str]) -> None:
    for target in list(paths.values()):
        with contextlib.suppress(OSError):
            _check(_libc.umount2(target.encode(), _MNT_DETACH), f"detaching {target}")
        _remove(target)
    paths.clear()


def _fresh_target(*, is_dir: bool) -> str:
    """A mount point for one view: ``STAGING/PID-RANDOM/view`` (a file for a file)."""
    global _swept
    os.makedirs(STAGING, mode=0o711, exist_ok=True)
    os.chmod(STAGING, 0o711)  # traversable by the sandbox user, never listable
    if not _swept:
        _swept = True
        _sweep()
    holder = os.path.join(STAGING, f"{os.getpid()}-{secrets.token_hex(16)}")
    os.mkdir(holder, 0o711)
    target = os.path.join(holder, "view")
    if is_dir:
        os.mkdir(target, 0o700)
    else:
        os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    return target


def _remove(target: str) -> None:
    with contextlib.suppress(OSError):
        if os.path.isdir(target):
            os.rmdir(target)
        else:
            os.unlink(target)
        os.rmdir(os.path.dirname(target))


def _sweep() -> None:
    """Detach the views of processes that are gone (killed before their cleanup)."""
    for name in os.listdir(STAGING):
        owner = name.partition("-")[0]
        if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            target = os.path.join(STAGING, name, "view")
            _libc.umount2(target.encode(), _MNT_DETACH)
            _remove(target)


def _userns_fd(owner: tuple[int, int], user: tuple[int, int]) -> int:
    """A user namespace mapping ``owner`` to ``user``, kept open for this process's
    lifetime (one per pair: the mapping is what an idmapped mount applies)."""
    key = (*owner, *user)
    with _userns_lock:
        if key not in _userns:
            _userns[key] = _make_userns(owner, user)
        return _userns[key]


def _make_userns(owner: tuple[int, int], user: tuple[int, int]) -> int:
    # A short-lived child holds the namespace while its maps are written; an fd to it
    # keeps the namespace alive after the child is gone. (os.unshare is Python 3.12+,
    # and unsharing this threaded process itself is not allowed anyway.)
    child = subprocess.Popen(
        ["/usr/bin/unshare", "--user", "--", "/bin/sh", "-c", "read _"],
        stdin=subprocess.PIPE,
        cwd="/",
        env={},
    )
    try:
        proc = f"/proc/{child.pid}"
        own = os.readlink("/proc/self/ns/user")
        for _ in range(1000):  # until unshare(2) has run in the child
            if os.readlink(f"{proc}/ns/user") != own:
                break
            time.sleep(0.001)
        else:
            raise SandboxUnavailable("cannot create a user namespace for an idmapped mount")
        with open(f"{proc}/uid_map", "w") as f:
            f.write(f"{owner[0]} {user[0]} 1\n")
        with open(f"{proc}/setgroups", "w") as f:
            f.write("deny")
        with open(f"{proc}/gid_map", "w") as f:
            f.write(f"{owner[1]} {user[1]} 1\n")
        return os.open(f"{proc}/ns/user", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        child.kill()
        child.wait()
