"""Applying a changeset to the real workspace, and undoing it.

Each path is applied atomically: new content is written to a temporary name in the same
directory and renamed over the old one, so a reader (or a crash) sees the old
file or the new one, never half of either. What a path had before is kept for undo
*first*: hard-linked (or, across file systems, copied) into ``saved/<i>``, or — for a
deletion — renamed there. Every step goes to ``journal.jsonl``; a gateway killed
mid-apply leaves ``plan.json`` without ``changeset.json``, and `resume` finishes the
paths not yet done.

Nothing on the way is followed: parent directories are opened one component at a time
with ``O_NOFOLLOW`` below the workspace, and a symbolic link in the changeset is
created as a link. A parent that is a link or not a directory stops that path.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import stat
import time
from pathlib import Path

from ..errors import AgentvisorError
from ..records import Declared, Default
from .scan import DELETED, Change
from .store import SessionStore, WorkspaceStore, read_json, write_json

TYPE_CHECKING = False  # importing typing costs `agentvisor exec` milliseconds
if TYPE_CHECKING:
    from typing import Any

CHUNK = 1 << 20
TEMP_PREFIX = ".agentvisor-apply-"


class ApplyRefused(AgentvisorError):
    """One path could not be applied; the message says why."""


class Entry(Declared, frozen=False):
    """One path of an applied changeset, as `agentvisor changes` and undo see it."""

    path: str
    kind: str
    entry: str
    signature: str
    before: str = "absent"  # "absent" | "saved" | "mode:<octal>"
    sha256: str | None = None  # of the new content (file) or link target (symlink)
    sha256_before: str | None = None
    identity: str | None = None  # inode and ctime of what the apply put there
    error: str | None = None


class Applied(Declared, frozen=False):
    """An applied changeset."""

    id: str
    session: str
    by: str  # "auto" or "person"
    time: float
    entries: list[Entry] = Default(factory=list)
    undo_bytes: int = 0
    undo_dropped: bool = False
    undone: bool = False
    complete: bool = True

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "session": self.session,
            "by": self.by,
            "time": self.time,
            "undo_bytes": self.undo_bytes,
            "undo_dropped": self.undo_dropped,
            "undone": self.undone,
            "complete": self.complete,
            "entries": [_entry_json(e) for e in self.entries],
        }


def _entry_json(entry: Entry) -> dict[str, Any]:
    return {
        "path": entry.path,
        "kind": entry.kind,
        "entry": entry.entry,
        "signature": entry.signature,
        "before": entry.before,
        "sha256": entry.sha256,
        "sha256_before": entry.sha256_before,
        "identity": entry.identity,
        "error": entry.error,
    }


def load_applied(directory: Path) -> Applied:
    record = read_json(directory / "changeset.json", None)
    complete = record is not None
    if record is None:
        record = read_json(directory / "plan.json", {})
    entries = [Entry(**e) for e in record.get("entries", [])]
    return Applied(
        id=directory.name,
        session=record.get("session", "?"),
        by=record.get("by", "?"),
        time=record.get("time", 0.0),
        entries=entries,
        undo_bytes=record.get("undo_bytes", 0),
        undo_dropped=record.get("undo_dropped", False),
        undone=record.get("undone", False),
        complete=complete,
    )


# -- applying --------------------------------------------------------------------------------


def apply(
    store: WorkspaceStore, session: SessionStore, changes: list[Change], *, by: str
) -> Applied:
    """Apply ``changes`` (parents first) as one changeset; the caller holds the lock."""
    directory = store.new_applied_dir()
    record = Applied(
        id=directory.name,
        session=session.id,
        by=by,
        time=time.time(),
        entries=[
            Entry(path=c.path, kind=c.kind, entry=c.entry, signature=c.signature) for c in changes
        ],
    )
    write_json(directory / "plan.json", record.as_json())
    return _run(store, session, directory, record)


def resume(store: WorkspaceStore) -> list[Applied]:
    """Finish every apply a crash interrupted (plan written, record not)."""
    finished = []
    for directory in store.applied_dirs():
        if (directory / "changeset.json").exists() or not (directory / "plan.json").exists():
            continue
        record = load_applied(directory)
        session = store.session(record.session)
        finished.append(_run(store, session, directory, record))
    return finished


def _run(store: WorkspaceStore, session: SessionStore, directory: Path, record: Applied) -> Applied:
    journal = _read_journal(directory)
    settled = session.settled()
    ours = session.ours()
    ws_fd = os.open(store.workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        with open(directory / "journal.jsonl", "a") as log:
            for index, entry in enumerate(record.entries):
                done = journal.get(index, {})
                if "done" in done:
                    _restore_outcome(entry, done)
                    continue
                try:
                    _apply_one(ws_fd, session, directory, index, entry, done, log)
                except (ApplyRefused, OSError) as exc:
                    entry.error = str(exc)
                    _log(log, {"i": index, "error": entry.error})
                    continue
                settled[entry.path] = entry.signature
                entry.identity = _identity(ws_fd, entry.path)
                if entry.identity is not None:
                    ours[entry.path] = entry.identity
                _log(log, {"i": index, "done": True, **_outcome(entry)})
    finally:
        os.close(ws_fd)
    if session.exists:
        session.save_settled(settled)
        session.save_ours(ours)
    record.undo_bytes = _tree_size(directory / "saved")
    record.complete = True
    write_json(directory / "changeset.json", record.as_json())
    return record


def _apply_one(
    ws_fd: int,
    session: SessionStore,
    directory: Path,
    index: int,
    entry: Entry,
    done: dict[str, Any],
    log: Any,
) -> None:
    parent_rel, _, name = entry.path.rpartition("/")
    parent = _open_parent(ws_fd, parent_rel, str(session.upper))
    try:
        saved = directory / "saved" / str(index)
        current = _lstat_at(parent, name)
        if "before" in done:
            entry.before = done["before"]
        elif os.path.lexists(saved):
            entry.before = "saved"
        elif current is None:
            entry.before = "absent"
            _log(log, {"i": index, "before": "absent"})
        elif entry.entry == "dir" and stat.S_ISDIR(current.st_mode):
            entry.before = f"mode:{stat.S_IMODE(current.st_mode):o}"
            _log(log, {"i": index, "before": entry.before})
        else:
            _save(parent, name, current, saved, moving=entry.kind == DELETED)
            entry.before = "saved"
        if entry.before == "saved" and saved.is_file() and not saved.is_symlink():
            entry.sha256_before = _hash_file(saved)
        source = os.path.join(session.upper, entry.path)
        # One temporary name per entry, so a resumed apply removes what a killed one left.
        tmp = f"{TEMP_PREFIX}{directory.name}-{index}"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=parent)
        if entry.kind == DELETED:
            _remove_at(parent, name, saved)
        elif entry.entry == "file":
            entry.sha256 = _place_file(parent, name, source, tmp)
        elif entry.entry == "symlink":
            target = os.readlink(source)
            entry.sha256 = hashlib.sha256(os.fsencode(target)).hexdigest()
            _place(parent, name, lambda tmp: os.symlink(target, tmp, dir_fd=parent), tmp)
        elif entry.entry == "dir":
            _place_dir(parent, name, os.lstat(source).st_mode, saved)
        else:
            raise ApplyRefused(f"{entry.path}: not a file, directory or symbolic link")
    finally:
        os.close(parent)


def _open_parent(ws_fd: int, rel: str, upper: str) -> int:
    """The directory ``rel`` below the workspace, made as the changeset has it when missing;
    no component may be a symbolic link."""
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=ws_fd)
    done = ""
    for part in [p for p in rel.split("/") if p]:
        done = f"{done}/{part}" if done else part
        try:
            nxt = _open_dir_at(fd, part, upper, done)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise ApplyRefused(
                    f"{done} is a symbolic link or not a directory in the workspace; "
                    "nothing is applied through it"
                ) from None
            raise
        finally:
            os.close(fd)
        fd = nxt
    return fd


def _open_dir_at(fd: int, part: str, upper: str, rel: str) -> int:
    """The directory ``part`` in ``fd``, never through a link; made when missing."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(part, flags, dir_fd=fd)
    except FileNotFoundError:
        mode = _upper_mode(upper, rel)
        with contextlib.suppress(FileExistsError):
            os.mkdir(part, mode, dir_fd=fd)
            os.chmod(part, mode, dir_fd=fd, follow_symlinks=False)
        return os.open(part, flags, dir_fd=fd)


def _upper_mode(upper: str, rel: str) -> int:
    try:
        return stat.S_IMODE(os.lstat(os.path.join(upper, rel)).st_mode)
    except OSError:
        return 0o755


def _save(parent: int, name: str, current: os.stat_result, saved: Path, *, moving: bool) -> None:
    """Keep what ``name`` holds now at ``saved`` (complete before it exists there)."""
    partial = saved.with_name(saved.name + ".partial")
    _remove_tree(partial)
    if moving or stat.S_ISDIR(current.st_mode):
        try:
            os.rename(name, saved, src_dir_fd=parent)
            return
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
    if stat.S_ISREG(current.st_mode):
        try:
            os.link(name, saved, src_dir_fd=parent, follow_symlinks=False)
            return
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                raise
    _copy_out(parent, name, current, partial)
    os.rename(partial, saved)
    if moving or stat.S_ISDIR(current.st_mode):
        _remove_at(parent, name, saved)


def _copy_out(parent: int, name: str, current: os.stat_result, target: Path) -> None:
    if stat.S_ISLNK(current.st_mode):
        os.symlink(os.readlink(name, dir_fd=parent), target)
    elif stat.S_ISDIR(current.st_mode):
        shutil.copytree(f"/proc/self/fd/{parent}/{name}", target, symlinks=True)
    else:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
        with os.fdopen(fd, "rb") as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, CHUNK)
        os.chmod(target, stat.S_IMODE(current.st_mode))


def _place_file(parent: int, name: str, source: str, tmp: str) -> str:
    digest = hashlib.sha256()
    mode = stat.S_IMODE(os.lstat(source).st_mode)

    def make(tmp: str) -> None:
        src_fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        dst_fd = os.open(
            tmp,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
            dir_fd=parent,
        )
        try:
            while chunk := os.read(src_fd, CHUNK):
                digest.update(chunk)
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst_fd, view) :]
            os.fchmod(dst_fd, mode)
        finally:
            os.close(src_fd)
            os.close(dst_fd)

    _place(parent, name, make, tmp)
    return digest.hexdigest()


def _place(parent: int, name: str, make: Any, tmp: str) -> None:
    """Make the new entry under the temporary name ``tmp``, then rename it over ``name``."""
    try:
        make(tmp)
        current = _lstat_at(parent, name)
        if current is not None and stat.S_ISDIR(current.st_mode):
            raise ApplyRefused(f"{name}: a directory is in the way")
        os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=parent)
        raise


def _place_dir(parent: int, name: str, upper_mode: int, saved: Path) -> None:
    current = _lstat_at(parent, name)
    if current is not None and not stat.S_ISDIR(current.st_mode):
        _remove_at(parent, name, saved)
        current = None
    if current is None:
        os.mkdir(name, 0o700, dir_fd=parent)
    os.chmod(name, stat.S_IMODE(upper_mode), dir_fd=parent, follow_symlinks=False)


def _remove_at(parent: int, name: str, saved: Path) -> None:
    """Remove ``name`` (already kept at ``saved``)."""
    current = _lstat_at(parent, name)
    if current is None:
        return
    if stat.S_ISDIR(current.st_mode):
        shutil.rmtree(f"/proc/self/fd/{parent}/{name}")
    else:
        os.unlink(name, dir_fd=parent)


# -- undo ------------------------------------------------------------------------------------


class UndoResult(Declared):
    changeset: str
    restored: list[str]
    skipped: list[tuple[str, str]]  # (path, why)


def undo(store: WorkspaceStore, directory: Path) -> UndoResult:
    """Revert one applied changeset, newest entry first; the caller holds the lock.

    A path the workspace changed again since the apply is left as it is and reported.
    """
    record = load_applied(directory)
    if record.undo_dropped:
        raise ApplyRefused(
            f"changeset {record.id}: its undo data was dropped to stay within workspace.undo_mb"
        )
    session = store.session(record.session)
    ours = session.ours() if session.exists else {}
    restored: list[str] = []
    skipped: list[tuple[str, str]] = []
    ws_fd = os.open(store.workspace, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for index in reversed(range(len(record.entries))):
            entry = record.entries[index]
            if entry.error:
                continue
            try:
                why = _undo_one(ws_fd, directory / "saved" / str(index), entry)
            except (ApplyRefused, OSError) as exc:
                why = str(exc)
            if why is None:
                restored.append(entry.path)
                identity = _identity(ws_fd, entry.path)
                if identity is None:
                    ours.pop(entry.path, None)
                else:
                    ours[entry.path] = identity
            else:
                skipped.append((entry.path, why))
    finally:
        os.close(ws_fd)
    if session.exists:
        session.save_ours(ours)
    record.undone = True
    write_json(directory / "changeset.json", record.as_json())
    _forget_undo(store, record.id)
    return UndoResult(changeset=record.id, restored=restored, skipped=skipped)


def _undo_one(ws_fd: int, saved: Path, entry: Entry) -> str | None:
    parent_rel, _, name = entry.path.rpartition("/")
    try:
        parent = _open_parent_existing(ws_fd, parent_rel)
    except FileNotFoundError:
        parent = None
    try:
        current = _lstat_at(parent, name) if parent is not None else None
        ours = entry.kind == DELETED or entry.entry == "dir" or current is None
        if not ours and entry.identity != _identity(ws_fd, entry.path):
            return "changed in the workspace since it was applied; left as it is"
        if entry.before.startswith("mode:"):
            if parent is not None and current is not None:
                os.chmod(name, int(entry.before[5:], 8), dir_fd=parent, follow_symlinks=False)
            return None
        if entry.before == "absent":
            if parent is None or current is None:
                return None
            if stat.S_ISDIR(current.st_mode):
                try:
                    os.rmdir(name, dir_fd=parent)
                except OSError:
                    return "a directory that is not empty any more; left as it is"
            else:
                os.unlink(name, dir_fd=parent)
            return None
        if parent is None:
            return "its directory is gone; left as it is"
        if entry.kind == DELETED and current is not None:
            return "something new is at this path; left as it is"
        if current is not None and stat.S_ISDIR(current.st_mode):
            if os.listdir(f"/proc/self/fd/{parent}/{name}"):
                return "a directory that is not empty any more; left as it is"
            os.rmdir(name, dir_fd=parent)
        # Renamed back (saved and workspace share a file system) or copied back.
        try:
            os.rename(saved, name, dst_dir_fd=parent)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            tmp = f"{TEMP_PREFIX}{os.urandom(4).hex()}"
            target = f"/proc/self/fd/{parent}/{tmp}"
            if saved.is_dir() and not saved.is_symlink():
                shutil.copytree(saved, target, symlinks=True)
            else:
                shutil.copy2(saved, target, follow_symlinks=False)
            os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        return None
    finally:
        if parent is not None:
            os.close(parent)


def _open_parent_existing(ws_fd: int, rel: str) -> int:
    fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=ws_fd)
    for part in [p for p in rel.split("/") if p]:
        try:
            nxt = os.open(
                part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd
            )
        finally:
            os.close(fd)
        fd = nxt
    return fd


# -- undo data bound -------------------------------------------------------------------------


def trim_undo(store: WorkspaceStore, limit_bytes: int) -> list[str]:
    """Drop the oldest undo data until the rest fits in ``limit_bytes``; the ids dropped."""
    sizes: dict[str, int] = store.undo_sizes().read()
    for directory in store.applied_dirs()[-1:]:
        record = load_applied(directory)
        if record.complete and not record.undone:
            sizes[record.id] = record.undo_bytes
    total = sum(sizes.values())
    dropped = []
    for changeset in sorted(sizes):
        if total <= limit_bytes:
            break
        directory = store.root / "applied" / changeset
        record = load_applied(directory)
        _remove_tree(directory / "saved")
        total -= sizes.pop(changeset)
        record.undo_dropped = True
        record.undo_bytes = 0
        write_json(directory / "changeset.json", record.as_json())
        dropped.append(record.id)
    store.undo_sizes().save(sizes)
    return dropped


def _forget_undo(store: WorkspaceStore, changeset: str) -> None:
    sizes: dict[str, int] = store.undo_sizes().read()
    if sizes.pop(changeset, None) is not None:
        store.undo_sizes().save(sizes)


# -- helpers ---------------------------------------------------------------------------------


def _identity(ws_fd: int, rel: str) -> str | None:
    """What the workspace holds at ``rel`` now (inode and ctime), to tell our own writes
    from a person's."""
    try:
        st = os.stat(rel, dir_fd=ws_fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    return f"{st.st_ino}:{st.st_ctime_ns}"


def _lstat_at(parent: int, name: str) -> os.stat_result | None:
    try:
        return os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _hash_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _tree_size(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _remove_tree(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _read_journal(directory: Path) -> dict[int, dict[str, Any]]:
    state: dict[int, dict[str, Any]] = {}
    with contextlib.suppress(FileNotFoundError), open(directory / "journal.jsonl") as f:
        for line in f:
            try:
                item = json.loads(line)
            except ValueError:
                continue  # a line the crash cut short
            state.setdefault(item["i"], {}).update(item)
    return state


def _outcome(entry: Entry) -> dict[str, Any]:
    return {
        "before": entry.before,
        "sha256": entry.sha256,
        "sha256_before": entry.sha256_before,
        "identity": entry.identity,
    }


def _restore_outcome(entry: Entry, done: dict[str, Any]) -> None:
    entry.before = done.get("before", entry.before)
    entry.sha256 = done.get("sha256")
    entry.sha256_before = done.get("sha256_before")
    entry.identity = done.get("identity")


def _log(log: Any, item: dict[str, Any]) -> None:
    # Flushed (to the page cache), so a killed process leaves every line it wrote.
    log.write(json.dumps(item) + "\n")
    log.flush()
