"""Settling a changeset while its sandbox runs, the same way for every caller.

A gateway session settles after each tool call (``gateway``); `agentvisor run` settles
every few seconds while the harness runs and once more when it exits (`Settler`). Both
judge paths with the same write policy (`write_policy`), record the same audit events
(`settle_recorded`), and fall back to direct writes or refuse the same way when the
sandbox cannot mount a changeset (`for_sandbox`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from ..actions import Action, Context
from ..errors import AgentvisorError, ConfigError
from ..records import replace
from . import Changesets, Settlement, audit_entry, settings_from

# typing and the audit event types cost `agentvisor exec` milliseconds on a run that
# changed nothing: imported where an event is made.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Protocol

    from ..actions import Decision
    from ..state.events import AuditEvent
    from .store import SessionStore

    class Policy(Protocol):
        def decide(self, action: Action, context: Context) -> Decision: ...


WriteDecider = Callable[[str], tuple[bool, str | None]]


def for_sandbox(
    config: Any,
    workspace: str | os.PathLike[str],
    *,
    unavailable: str | None,
    warnings: list[str],
    quota_bytes: int | None = None,
) -> Changesets | None:
    """The workspace's changesets, unless ``workspace.mode`` is direct.

    ``unavailable`` says why the sandbox at hand cannot mount a changeset (None: it
    can). A mode the config file chose is then refused; the default falls back to direct
    writes, with a warning appended to ``warnings``. ``quota_bytes``: the size of each
    changeset's layers (``sandbox.disk_mb``'s share for the workspace).
    """
    settings = settings_from(config)
    if settings.mode == "direct":
        return None
    if unavailable is not None:
        why = f"workspace.mode {settings.mode} needs {unavailable}"
        if settings.mode_chosen:
            raise ConfigError(f"{why}; set workspace.mode: direct to write directly")
        warnings.append(f"{why}: the agent's writes land directly in the workspace")
        return None
    return Changesets(workspace, replace(settings, quota_bytes=quota_bytes))


def write_policy(policy: Policy, context: Context) -> WriteDecider:
    """The write policy as `Changesets.settle` asks it: (allowed, reason when refused).
    Nobody is asked while settling: an ``ask`` holds the path for a person instead."""

    def decide(path: str) -> tuple[bool, str | None]:
        decision = policy.decide(Action("write", path), context)
        if decision.verdict == "allow":
            return True, None
        if decision.verdict == "ask":
            return False, f"asks a person ({decision.reason})"
        return False, decision.reason

    return decide


def settle_recorded(
    changesets: Changesets, session: SessionStore, decide: WriteDecider
) -> tuple[Settlement | None, list[AuditEvent]]:
    """Apply or hold what the sandbox changed; the audit events that record it (an
    apply, a hold, undo data dropped, or a settle that failed)."""
    try:
        settlement = changesets.settle(session, decide)
    except (AgentvisorError, OSError) as exc:
        from ..state.events import AuditEvent

        error = AuditEvent(
            kind="changes",
            session=session.id,
            decision="error",
            reason=f"the changeset could not be settled: {exc}",
        )
        return None, [error]
    return settlement, settlement_events(session.id, settlement)


def settlement_events(session: str, settlement: Settlement) -> list[AuditEvent]:
    events = []
    if settlement.applied is not None:
        applied = settlement.applied
        events.append(
            changes_event(
                session,
                "apply",
                [audit_entry(e) for e in applied.entries if not e.error],
                ref=applied.id,
                result=f"applied changeset {applied.id} ({applied.by})",
            )
        )
    if settlement.new_held:
        events.append(
            changes_event(
                session,
                "hold",
                [{"path": p.path, "kind": p.kind, "reason": p.reason} for p in settlement.new_held],
                result=f"{len(settlement.new_held)} path(s) held for a person",
            )
        )
    if settlement.undo_dropped:
        events.append(
            changes_event(
                session,
                "undo-dropped",
                [],
                result="undo data dropped (workspace.undo_mb): changesets "
                + ", ".join(settlement.undo_dropped),
            )
        )
    return events


def changes_event(
    session: str | None,
    what: str,
    paths: list[dict[str, Any]],
    *,
    ref: str | None = None,
    result: str = "",
) -> AuditEvent:
    """An apply, hold or undo-data event: the paths with their kind and content hashes."""
    from ..state.events import AuditEvent

    return AuditEvent(
        kind="changes",
        session=session,
        decision=what,
        arguments={"paths": paths},
        ref=ref,
        result=result,
    )


class Settler:
    """Settles one changeset every ``every`` seconds from a thread while a sandbox runs,
    and once more at `stop` (what the program wrote last). ``record`` receives the
    audit events of each settle.

    A file may be applied while the program is still writing it; the next settle
    applies what it became (each apply is atomic per path and undoable).
    """

    def __init__(
        self,
        changesets: Changesets,
        session: SessionStore,
        decide: WriteDecider,
        record: Callable[[list[AuditEvent]], None],
        *,
        every: float,
    ) -> None:
        self.changesets = changesets
        self.session = session
        self.decide = decide
        self.record = record
        self.every = every
        self.applied: list[str] = []  # paths applied, in order (a path once per apply)
        self.changesets_applied: list[str] = []  # their changeset ids
        self.errors: list[str] = []
        self.last: Settlement | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="agentvisor-settle")

    def start(self) -> Settler:
        self._thread.start()
        return self

    def stop(self) -> Settlement | None:
        """End the periodic settles and settle once more; the last settlement (its
        ``held`` is everything that waits for a person now)."""
        self._stop.set()
        self._thread.join()
        self._settle_once()
        return self.last

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self._settle_once()

    def _settle_once(self) -> None:
        settlement, events = settle_recorded(self.changesets, self.session, self.decide)
        try:
            self.record(events)
        except AgentvisorError as exc:  # said at stop; the settles go on
            self.errors.append(f"the audit log did not record a settle: {exc}")
        if settlement is None:
            self.errors += [e.reason or "" for e in events]
            return
        self.last = settlement
        applied = settlement.applied
        if applied is not None:
            self.changesets_applied.append(applied.id)
            self.applied += [e.path for e in applied.entries if not e.error]
