"""Changesets: the agent's writes reach the real workspace only through a checked apply.

Every sandbox of a session sees the workspace through an overlay whose upper layer is the
session's changeset (``sandbox/overlay.py`` mounts it; the host-side file tools write
through the same mount). The real workspace changes only when a changeset is applied:

- ``workspace.mode: auto`` (default): after each tool call the gateway `settle`s — changed
  paths pass the write policy and are applied, except the host-run class (`classify`),
  conflicts and anything the policy refused, which are held for a person;
- ``review``: everything is held; a person applies (``agentvisor apply``);
- ``direct``: no overlay, writes land at once (today's behaviour).

A person lists, applies, discards and undoes with the CLI (``agentvisor changes``,
``diff``, ``apply``, ``discard``, ``undo``); no tool the agent can call does any of that.
See docs/changesets.md.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import ConfigError
from ..records import Declared, Default, replace
from .apply import (
    Applied,
    ApplyRefused,
    Entry,
    UndoResult,
    apply,
    load_applied,
    resume,
    trim_undo,
    undo,
)
from .classify import Classifier
from .scan import DELETED, Change, scan
from .store import SessionStore, WorkspaceStore

TYPE_CHECKING = False  # importing typing costs `agentvisor exec` milliseconds
if TYPE_CHECKING:
    from typing import Any

__all__ = [
    "Applied",
    "ApplyRefused",
    "Change",
    "Changesets",
    "Pending",
    "Settings",
    "Settlement",
    "UndoResult",
    "audit_entry",
    "resume",
    "settings_from",
    "topmost",
]

MIB = 1024 * 1024
QUOTA_REACHED = (
    "sandbox.disk_mb reached: the session's changeset is full, so what was written last "
    "may be cut short; a person applies"
)
CONFLICT = (
    "conflict: changed in the workspace since the session started (by a person or another "
    "session); not overwritten"
)


class Settings(Declared):
    """``workspace.*`` of the config (the schema checks them; docs/changesets.md)."""

    mode: str = "auto"
    hold: tuple[str, ...] = ()
    undo_mb: int = 512
    # Whether the config file chose the mode (a backend that cannot offer it then refuses).
    mode_chosen: bool = False
    # sandbox.disk_mb's share for the workspace: the size of each changeset's layers.
    quota_bytes: int | None = None


def settings_from(config: Any) -> Settings:
    """The ``workspace`` section of ``config``."""
    section = config.workspace
    chosen = "mode" in getattr(section, "model_fields_set", ())
    return Settings(
        mode=section.mode,
        hold=tuple(section.hold),
        undo_mb=int(section.undo_mb),
        mode_chosen=chosen,
    )


class Pending(Declared):
    """A change not applied yet, and why it waits (None: nothing holds it)."""

    path: str
    kind: str
    entry: str
    signature: str
    reason: str | None = None
    conflict: bool = False

    def as_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "kind": self.kind,
            "entry": self.entry,
            "reason": self.reason,
            "conflict": self.conflict,
        }


class Settlement(Declared):
    """What one settle or apply did."""

    applied: Applied | None = None
    held: list[Pending] = Default(factory=list)
    new_held: list[Pending] = Default(factory=list)  # held now, not at the last settle
    undo_dropped: list[str] = Default(factory=list)  # changesets whose undo data went


class Changesets:
    """The changesets of one workspace: the gateway's and the CLI's way in."""

    def __init__(
        self,
        workspace: str | os.PathLike[str],
        settings: Settings | None = None,
        *,
        root: Path | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.store = WorkspaceStore(workspace, root)
        self.workspace = self.store.workspace
        self.classifier = Classifier(self.workspace, self.settings.hold)

    # -- sessions ------------------------------------------------------------------------

    def start(self, session_id: str) -> SessionStore:
        session = self.store.session(session_id)
        session.create(self.settings.mode, self.settings.quota_bytes)
        return session

    def session(self, session_id: str) -> SessionStore:
        session = self.store.session(session_id)
        if not session.exists:
            raise ConfigError(f"no changeset for session {session_id} in {self.workspace}")
        return session

    def sessions(self) -> list[SessionStore]:
        return self.store.sessions()

    def finish(self, session: SessionStore) -> None:
        """The session ended: forget its changeset unless something still waits."""
        if not self.pending(session):
            session.remove()

    def prune(self) -> list[str]:
        """Forget the changesets of ended sessions with nothing left pending (after a
        person applied or discarded the rest); the session ids forgotten."""
        gone = []
        with self.store.locked():
            for session in self.store.sessions():
                if not session.live and not self.pending(session):
                    session.remove()
                    gone.append(session.id)
        return gone

    # -- looking -------------------------------------------------------------------------

    def pending(self, session: SessionStore) -> list[Pending]:
        """What the changeset holds that is not applied, discarded or undone yet."""
        if not session.upper.is_dir():
            return []
        settled = session.settled()
        held = session.held()
        info = session.info
        started, review = int(info.get("started_ns", 0)), info.get("mode") == "review"
        ours = session.ours()
        self.classifier.forget()  # a person may have changed core.hooksPath meanwhile
        found = []
        for change in scan(str(session.upper), self.workspace, settled):
            if settled.get(change.path) == change.signature:
                continue
            conflict = self._conflict(change, started, ours)
            reason = CONFLICT if conflict else self._static_reason(change, session)
            if reason is None and review:
                reason = "workspace.mode is review: a person applies"
            if reason is None:
                recorded = held.get(change.path)
                if recorded and recorded.get("signature") == change.signature:
                    reason = recorded.get("reason")
            found.append(
                Pending(
                    path=change.path,
                    kind=change.kind,
                    entry=change.entry,
                    signature=change.signature,
                    reason=reason,
                    conflict=conflict,
                )
            )
        return found

    def applied(self) -> list[Applied]:
        return [load_applied(d) for d in self.store.applied_dirs()]

    def diff(self, session: SessionStore, change: Pending) -> str:
        """The pending change as a unified diff against the workspace (or one line)."""
        from .diff import render

        return render(
            change,
            os.path.join(self.workspace, change.path),
            os.path.join(session.upper, change.path),
        )

    # -- acting --------------------------------------------------------------------------

    def settle(
        self, session: SessionStore, decide: Callable[[str], tuple[bool, str | None]]
    ) -> Settlement:
        """After a tool call (``auto``): apply what may be applied, hold the rest.

        ``decide(absolute path)`` is the write policy: (allowed, reason when refused).
        """
        with self.store.locked():
            resume(self.store)
            pending = self.pending(session)
            ready: list[Change] = []
            held: list[Pending] = []
            blocked: list[str] = []
            full = session.full
            for item in pending:
                reason = item.reason
                if reason is None and full:
                    reason = QUOTA_REACHED
                if reason is None and _below_any(item.path, blocked):
                    reason = "its directory is held"
                if reason is None:
                    allowed, why = decide(os.path.join(self.workspace, item.path))
                    reason = None if allowed else f"write policy: {why}"
                if reason is None:
                    ready.append(_change(item))
                else:
                    held.append(replace(item, reason=reason))
                    if item.entry == "dir":
                        blocked.append(item.path)
            before = session.held()
            fresh = [
                p
                for p in held
                if before.get(p.path) != {"signature": p.signature, "reason": p.reason or ""}
            ]
            now_held = {p.path: {"signature": p.signature, "reason": p.reason or ""} for p in held}
            if now_held != before:
                session.save_held(now_held)
            settlement = self._apply_locked(session, ready, held, by="auto")
            failed = _failed(settlement.applied)
            if failed:
                # Held, not retried at every call: a person looks (or applies once fixed).
                session.save_held(
                    {
                        **session.held(),
                        **{
                            p.path: {"signature": p.signature, "reason": p.reason or ""}
                            for p in failed
                        },
                    }
                )
            return Settlement(
                applied=settlement.applied,
                held=[*held, *failed],
                new_held=[*fresh, *failed],
                undo_dropped=settlement.undo_dropped,
            )

    def apply(
        self,
        session: SessionStore,
        paths: Iterable[str] = (),
        *,
        force: bool = False,
    ) -> Settlement:
        """A person applies pending changes (all, or those at or below ``paths``).

        Conflicts stay held unless ``force``; entries that are not files, directories or
        links never apply.
        """
        wanted = [self.relative(p) for p in paths]
        with self.store.locked():
            resume(self.store)
            ready: list[Change] = []
            held: list[Pending] = []
            for item in self.pending(session):
                if wanted and not _below_any(item.path, wanted, inclusive=True):
                    continue
                if item.entry == "other" or (item.conflict and not force):
                    held.append(item)
                else:
                    ready.append(_change(item))
            if wanted and not ready and not held:
                raise ConfigError(f"nothing pending at {', '.join(wanted)} in session {session.id}")
            return self._apply_locked(session, ready, held, by="person")

    def discard(self, session: SessionStore, paths: Iterable[str] = ()) -> list[Pending]:
        """Drop pending changes: they never reach the workspace (the session's own view
        keeps them until it ends)."""
        wanted = [self.relative(p) for p in paths]
        with self.store.locked():
            settled = session.settled()
            held = session.held()
            dropped = []
            for item in self.pending(session):
                if wanted and not _below_any(item.path, wanted, inclusive=True):
                    continue
                settled[item.path] = item.signature
                held.pop(item.path, None)
                dropped.append(item)
            session.save_settled(settled)
            session.save_held(held)
            return dropped

    def undo(self, changeset: str | None = None) -> UndoResult:
        """Revert the last applied changeset (or the one named), restoring what it
        overwrote or deleted."""
        with self.store.locked():
            resume(self.store)
            candidates = [
                d
                for d in self.store.applied_dirs()
                if (changeset is None or d.name == changeset.zfill(6))
                and not load_applied(d).undone
                and load_applied(d).complete
            ]
            if not candidates:
                what = f"changeset {changeset}" if changeset else "an applied changeset"
                raise ConfigError(f"no {what} to undo in {self.workspace}")
            return undo(self.store, candidates[-1])

    # -- helpers -------------------------------------------------------------------------

    def _apply_locked(
        self, session: SessionStore, ready: list[Change], held: list[Pending], *, by: str
    ) -> Settlement:
        if not ready:
            return Settlement(held=held)
        record = apply(self.store, session, ready, by=by)
        dropped = trim_undo(self.store, self.settings.undo_mb * MIB)
        return Settlement(applied=record, held=held, undo_dropped=dropped)

    def _static_reason(self, change: Change, session: SessionStore) -> str | None:
        if change.entry == "other":
            return "not a file, directory or symbolic link; never applied"
        return self.classifier.reason(change, str(session.upper))

    def _conflict(self, change: Change, started: int, ours: dict[str, str]) -> bool:
        """Whether the workspace changed at this path since the session started (at
        ``started``), other than by this session's own applies (``ours``); ctime, because
        a person cannot set it back."""
        path = os.path.join(self.workspace, change.path)
        try:
            st = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        if not stat.S_ISDIR(st.st_mode):
            return st.st_ctime_ns > started and ours.get(change.path) != _identity(st)
        if change.kind != DELETED:
            return False  # a directory's ctime moves with every entry applied below it
        for root, _dirs, files in os.walk(path):
            for name in files:
                full = os.path.join(root, name)
                inner = os.lstat(full)
                rel = os.path.relpath(full, self.workspace)
                if inner.st_ctime_ns > started and ours.get(rel) != _identity(inner):
                    return True
        return False

    def relative(self, path: str) -> str:
        full = os.path.normpath(os.path.join(self.workspace, path))
        rel = os.path.relpath(full, self.workspace)
        if rel == ".":
            return ""
        if rel.startswith(".."):
            raise ConfigError(f"{path} is outside the workspace {self.workspace}")
        return rel


def audit_entry(entry: Entry) -> dict[str, Any]:
    """An applied path as the audit log keeps it: path, kind and content hashes."""
    return {
        "path": entry.path,
        "kind": entry.kind,
        "sha256": entry.sha256,
        "sha256_before": entry.sha256_before,
    }


def topmost(items: list[Pending]) -> list[Pending]:
    """The items not below another item that is a directory (for a short listing)."""
    dirs = [p.path for p in items if p.entry == "dir"]
    return [p for p in items if not _below_any(p.path, dirs)]


def _identity(st: os.stat_result) -> str:
    return f"{st.st_ino}:{st.st_ctime_ns}"


def _failed(applied: Applied | None) -> list[Pending]:
    """Entries an apply could not make, as held changes whose reason is the error."""
    if applied is None:
        return []
    return [
        Pending(
            path=e.path,
            kind=e.kind,
            entry=e.entry,
            signature=e.signature,
            reason=f"could not be applied: {e.error}",
        )
        for e in applied.entries
        if e.error
    ]


def _change(item: Pending) -> Change:
    return Change(path=item.path, kind=item.kind, entry=item.entry, signature=item.signature)


def _below_any(path: str, tops: list[str], *, inclusive: bool = False) -> bool:
    return any(
        top == "" or path.startswith(top + "/") or (inclusive and path == top) for top in tops
    )
