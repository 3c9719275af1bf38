"""What a changeset changes: the overlay's upper directory compared with the workspace.

overlayfs records a session's writes in its upper directory: new and rewritten files and
symbolic links as themselves, a deletion as a *whiteout* (a character device 0/0), and a
directory that replaced one of the workspace's as an *opaque* directory (the xattr
``user.overlay.opaque``, as the mount uses ``userxattr``), which hides everything the
workspace had below it. The scan walks only the upper directory (its cost grows with the
changes, never with the workspace) and compares each entry with the workspace, without
following any symbolic link on either side.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping

from ..records import Declared

OPAQUE_XATTR = "user.overlay.opaque"
CHUNK = 1 << 20

# What a change does to its path, as `agentvisor changes` shows it.
ADDED, MODIFIED, DELETED, MODE, SYMLINK = "added", "modified", "deleted", "mode", "symlink"


class Change(Declared):
    """One path the changeset would change in the workspace."""

    path: str  # relative to the workspace, with "/" separators
    kind: str  # ADDED | MODIFIED | DELETED | MODE | SYMLINK
    entry: str  # what the upper layer holds: "file" | "dir" | "symlink" | "absent" | "other"
    signature: str  # the upper entry's identity, to notice when the agent changes it again


def scan(upper: str, workspace: str, settled: Mapping[str, str] | None = None) -> list[Change]:
    """Every change of ``upper`` against ``workspace``, parents before their children.

    An entry whose signature is in ``settled`` (applied, discarded or undone as it is
    now) is not compared again: a settled file costs one stat, not a read.
    """
    return list(_walk(upper, workspace, "", opaque=False, settled=settled or {}))


def _walk(
    upper: str, workspace: str, rel: str, *, opaque: bool, settled: Mapping[str, str]
) -> Iterator[Change]:
    names = _names(os.path.join(upper, rel))
    if names is None:
        return  # gone meanwhile, or made unreadable: nothing below it is proposed
    for name in names:
        path = f"{rel}/{name}" if rel else name
        up = _lstat(os.path.join(upper, path))
        if up is None:
            continue  # the agent removed it while the scan ran
        low = _lstat(os.path.join(workspace, path))
        is_dir = stat.S_ISDIR(up.st_mode)
        if is_dir or settled.get(path) != _signature(up):
            change = _compare(upper, workspace, path, up, low)
            if change is not None:
                yield change
        if is_dir:
            # Below an opaque directory the view shows nothing of the workspace, at any depth.
            dir_opaque = opaque or _is_opaque(os.path.join(upper, path))
            upper_names = _names(os.path.join(upper, path))
            if upper_names is None:
                continue  # unreadable: never read as "empty", which would delete its twin
            if dir_opaque and low is not None and stat.S_ISDIR(low.st_mode):
                yield from _hidden(workspace, path, set(upper_names))
            yield from _walk(upper, workspace, path, opaque=dir_opaque, settled=settled)


def _hidden(workspace: str, rel: str, upper_names: set[str]) -> Iterator[Change]:
    """Workspace entries an opaque directory hides: deleted, unless the upper has them."""
    for name in _names(os.path.join(workspace, rel)) or []:
        if name not in upper_names:
            yield Change(path=f"{rel}/{name}", kind=DELETED, entry="absent", signature="absent")


def _names(directory: str) -> list[str] | None:
    try:
        with os.scandir(directory) as entries:
            return sorted(entry.name for entry in entries)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return None


def _compare(
    upper: str, workspace: str, path: str, up: os.stat_result, low: os.stat_result | None
) -> Change | None:
    signature = _signature(up)
    if _is_whiteout(up):
        if low is None:
            return None  # deleted already, or never there
        return Change(path=path, kind=DELETED, entry="absent", signature=signature)
    entry = _entry(up)
    if low is None:
        kind = SYMLINK if entry == "symlink" else ADDED
        return Change(path=path, kind=kind, entry=entry, signature=signature)
    if entry != _entry(low):
        kind = SYMLINK if entry == "symlink" else MODIFIED
        return Change(path=path, kind=kind, entry=entry, signature=signature)
    if entry == "symlink":
        if os.readlink(os.path.join(upper, path)) == os.readlink(os.path.join(workspace, path)):
            return None
        return Change(path=path, kind=SYMLINK, entry=entry, signature=signature)
    if entry == "file" and not same_content(
        os.path.join(upper, path), os.path.join(workspace, path)
    ):
        return Change(path=path, kind=MODIFIED, entry=entry, signature=signature)
    if entry == "other":
        return Change(path=path, kind=ADDED, entry=entry, signature=signature)
    if stat.S_IMODE(up.st_mode) != stat.S_IMODE(low.st_mode):
        return Change(path=path, kind=MODE, entry=entry, signature=signature)
    return None


def same_content(a: str, b: str) -> bool:
    """Whether two regular files hold the same bytes (read in chunks: files may be large);
    one that cannot be read counts as different (the apply then says why)."""
    try:
        if os.path.getsize(a) != os.path.getsize(b):
            return False
        with open(a, "rb") as fa, open(b, "rb") as fb:
            while True:
                chunk = fa.read(CHUNK)
                if chunk != fb.read(CHUNK):
                    return False
                if not chunk:
                    return True
    except OSError:
        return False


def _entry(st: os.stat_result) -> str:
    if stat.S_ISREG(st.st_mode):
        return "file"
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    if stat.S_ISLNK(st.st_mode):
        return "symlink"
    return "other"


def _is_whiteout(st: os.stat_result) -> bool:
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _is_opaque(path: str) -> bool:
    try:
        return os.getxattr(path, OPAQUE_XATTR, follow_symlinks=False) == b"y"
    except OSError:
        return False


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _signature(st: os.stat_result) -> str:
    return f"{st.st_mode:o}:{st.st_size}:{st.st_ino}:{st.st_mtime_ns}:{st.st_ctime_ns}"
