"""Where changesets live on disk, below agentvisor's state directory (never in a sandbox).

    <state>/changes/<workspace key>/
        workspace.json            which workspace this is
        lock                      held while anything applies, discards or undoes
        undo.jsonl                changeset -> bytes of undo data kept
        sessions/<session>/       one session's changeset
            upper/ work/          the overlay's upper and work directories
            layers.img            with sandbox.disk_mb: an ext4 image (agentvisor.changes.quota)
            layers/upper/ layers/work/  ... mounted here: the layers then live in it
            session.json          id, start (a ctime, for conflicts), mode
            settled.jsonl         path -> upper signature applied, discarded or undone
            ours.jsonl            path -> identity of what this session put in the workspace
            held.jsonl            path -> why the gateway held it (signature, reason)
        applied/<NNNNNN>/         one applied changeset
            plan.json             what it applies (written first: an interrupted apply resumes)
            journal.jsonl         progress, one line per step
            saved/<i>             what entry i overwrote or deleted (for undo)
            changeset.json        the finished record (written last)

Everything changes under the workspace lock, so two sessions or a person's CLI never
interleave. Maps that change at every apply are append-only logs (`Log`); the other
JSON files are written once, or rewritten whole by a rename (a reader never sees half).
Nothing is fsynced per path: what must survive is a killed gateway, whose writes the page
cache keeps; an apply is ordered so that any prefix of it resumes correctly.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import secrets
import shutil
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

from .. import paths
from ..errors import LimitNotEnforced
from . import quota

TYPE_CHECKING = False  # importing typing costs `agentvisor exec` milliseconds
if TYPE_CHECKING:
    from typing import Any


class Log:
    """A map kept as an append-only log of ``{"p": key, "v": value}`` lines (the last line
    for a key wins; ``null`` removes it).

    Rewriting a file by renaming a new one over it makes ext4 flush the new data first
    (``auto_da_alloc``): milliseconds for every apply. Appending costs microseconds, and a
    line cut short by a crash is skipped.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        try:
            f = open(self.path)  # noqa: SIM115 (closed below)
        except FileNotFoundError:
            return out
        with f:
            for line in f:
                try:
                    item = json.loads(line)
                except ValueError:
                    continue
                if item.get("v") is None:
                    out.pop(item.get("p"), None)
                else:
                    out[item["p"]] = item["v"]
        return out

    def save(self, value: dict[str, Any]) -> None:
        """Make the map ``value``, appending only what differs."""
        current = self.read()
        lines = [{"p": k, "v": v} for k, v in value.items() if current.get(k) != v]
        lines += [{"p": k, "v": None} for k in current if k not in value]
        if lines:
            with open(self.path, "a") as f:
                f.write("".join(json.dumps(line) + "\n" for line in lines))


def workspace_key(workspace: str) -> str:
    name = os.path.basename(workspace.rstrip("/")) or "root"
    return f"{name}-{zlib.crc32(workspace.encode()):08x}"


def read_json(path: Path, default: Any) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return default


def write_json(path: Path, value: Any) -> None:
    """Replace ``path`` whole (a rename: a reader or a killed writer never leaves half)."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    with open(tmp, "w") as f:
        json.dump(value, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


class WorkspaceStore:
    """The changesets of one workspace."""

    def __init__(self, workspace: str | os.PathLike[str], root: Path | None = None) -> None:
        self.workspace = os.path.realpath(workspace)
        base = root or paths.state_dir() / "changes"
        self.root = base / workspace_key(self.workspace)
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        (self.root / "sessions").mkdir(exist_ok=True)
        (self.root / "applied").mkdir(exist_ok=True)
        if not (self.root / "workspace.json").exists():
            write_json(self.root / "workspace.json", {"workspace": self.workspace})

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        fd = os.open(self.root / "lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    # -- sessions ------------------------------------------------------------------------

    def session(self, session_id: str) -> SessionStore:
        return SessionStore(self, session_id)

    def sessions(self) -> list[SessionStore]:
        found = []
        for entry in sorted((self.root / "sessions").iterdir()):
            if (entry / "session.json").exists():
                found.append(SessionStore(self, entry.name))
        return found

    # -- applied changesets --------------------------------------------------------------

    def undo_sizes(self) -> Log:
        """Changeset id -> bytes of undo data kept (spares reading every record)."""
        return Log(self.root / "undo.jsonl")

    def applied_dirs(self) -> list[Path]:
        return sorted(p for p in (self.root / "applied").iterdir() if p.name.isdigit())

    def new_applied_dir(self) -> Path:
        existing = self.applied_dirs()
        number = int(existing[-1].name) + 1 if existing else 1
        directory = self.root / "applied" / f"{number:06d}"
        directory.mkdir()
        (directory / "saved").mkdir()
        return directory


class SessionStore:
    """One session's changeset: the overlay's directories and what was done with it."""

    def __init__(self, workspace: WorkspaceStore, session_id: str) -> None:
        if not session_id or "/" in session_id or session_id.startswith("."):
            raise ValueError(f"not a session id: {session_id!r}")
        self.workspace = workspace
        self.id = session_id
        self.root = workspace.root / "sessions" / session_id
        self.image = self.root / "layers.img"
        self.layers = self.root / "layers"
        self.upper = self.root / "upper"
        self.work = self.root / "work"
        if self.image.exists():
            self._use_image()

    def _use_image(self) -> None:
        """Put the layers on the changeset's size-limited image (mounting it if a reboot
        unmounted it: its pending writes are only readable there)."""
        quota.mount(self.image, self.layers)
        self.upper = self.layers / "upper"
        self.work = self.layers / "work"

    def create(self, mode: str, quota_bytes: int | None = None) -> None:
        """Make the directories (a session that comes back keeps its changeset). The
        session's start is the ctime of the ``upper`` directory made for it: the same
        (coarse) clock as the workspace's ctimes that conflicts are judged by.

        ``quota_bytes`` (sandbox.disk_mb's share for the workspace): the layers go on an
        image of that size, so the session can write no more than that to the workspace."""
        self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
        if quota_bytes is not None and not self.image.exists():
            if self.upper.exists():
                raise LimitNotEnforced(
                    f"sandbox.disk_mb: session {self.id} already has a changeset without "
                    "a quota; apply or discard it (agentvisor changes) or use a new session"
                )
            quota.create(self.image, quota_bytes)
            self._use_image()
        for directory in (self.root, self.upper, self.work):
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        info = self.info
        if info.get("mode") != mode or "started_ns" not in info:
            started = info.get("started_ns") or os.stat(self.upper).st_ctime_ns
            record = {"id": self.id, "mode": mode, "started_ns": started, "time": time.time()}
            write_json(self.root / "session.json", record)

    def hold_live(self) -> int:
        """Mark the session as running (a shared lock on ``live``, released when the
        returned descriptor is closed, also by a crash)."""
        fd = os.open(self.root / "live", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_SH)
        return fd

    @property
    def live(self) -> bool:
        """Whether a gateway still runs this session."""
        try:
            fd = os.open(self.root / "live", os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)
        return False

    @property
    def exists(self) -> bool:
        return (self.root / "session.json").exists()

    @property
    def info(self) -> dict[str, Any]:
        value: dict[str, Any] = read_json(self.root / "session.json", {})
        return value

    @property
    def started_ns(self) -> int:
        return int(self.info.get("started_ns", 0))

    def settled(self) -> dict[str, str]:
        return Log(self.root / "settled.jsonl").read()

    def ours(self) -> dict[str, str]:
        return Log(self.root / "ours.jsonl").read()

    def held(self) -> dict[str, dict[str, str]]:
        value: dict[str, dict[str, str]] = Log(self.root / "held.jsonl").read()
        return value

    def save_settled(self, value: dict[str, str]) -> None:
        Log(self.root / "settled.jsonl").save(value)

    def save_ours(self, value: dict[str, str]) -> None:
        Log(self.root / "ours.jsonl").save(value)

    def save_held(self, value: dict[str, dict[str, str]]) -> None:
        Log(self.root / "held.jsonl").save(value)

    @property
    def full(self) -> bool:
        """Whether the changeset reached its quota (sandbox.disk_mb): what was written
        last may then be cut short."""
        return self.image.exists() and quota.full(self.layers)

    def remove(self) -> None:
        """Forget the changeset (nothing pending is left in it)."""
        quota.unmount(self.layers)
        shutil.rmtree(self.root, ignore_errors=True)
