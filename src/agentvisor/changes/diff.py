"""A pending change as a person reads it: a unified diff, or a line for what has none
(directories, links, binary and large files)."""

from __future__ import annotations

import difflib
import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import Pending

MAX_TEXT = 4 << 20


def render(item: Pending, old: str, new: str) -> str:
    label_old, label_new = f"a/{item.path}", f"b/{item.path}"
    if item.entry == "dir":
        return (
            f"{item.kind} directory {item.path}/\n"
            if item.kind != "mode"
            else _mode(item, old, new)
        )
    if item.entry == "symlink":
        return f"symlink {item.path} -> {os.readlink(new)}\n"
    if item.kind == "deleted":
        before = _text(old)
        if before is None:
            return f"deleted {item.path}\n"
        return "".join(difflib.unified_diff(before, [], label_old, "/dev/null"))
    if item.kind == "mode":
        return _mode(item, old, new)
    after = _text(new)
    before = _text(old) if os.path.lexists(old) else []
    if after is None or before is None:
        return f"binary file {item.path} {item.kind}\n"
    return "".join(
        difflib.unified_diff(before, after, label_old if before else "/dev/null", label_new)
    )


def _mode(item: Pending, old: str, new: str) -> str:
    return (
        f"mode {item.path}: {stat.S_IMODE(os.lstat(old).st_mode):o} -> "
        f"{stat.S_IMODE(os.lstat(new).st_mode):o}\n"
    )


def _text(path: str) -> list[str] | None:
    """The file's lines, or None for a binary (or large) file: a diff shows text only."""
    try:
        if os.path.getsize(path) > MAX_TEXT:
            return None
        with open(path, "rb") as f:
            data = f.read()
    except (FileNotFoundError, IsADirectoryError):
        return None
    if b"\0" in data[:8192]:
        return None
    return data.decode("utf-8", errors="replace").splitlines(keepends=True)
