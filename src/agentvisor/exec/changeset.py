"""One `agentvisor exec` run over a changeset, as a gateway session's commands run.

The run's writes land in the upper layer of a changeset mounted over the workspace
(``sandbox/overlay.py``); when the command has ended (its background processes with it:
the sandbox's pid namespace dies with it) the changeset is settled once: ordinary edits
are applied, what the user's own tools would execute later (git internals and nested
repositories at any depth, ``agentvisor.yaml``, ``.envrc``, ... see `changes.classify`)
waits for a person, who reviews it with ``agentvisor changes`` and ``agentvisor apply``.
``workspace.mode: direct`` keeps writing straight into the workspace (docs/changesets.md).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing costs milliseconds on every `exec`
if TYPE_CHECKING:
    from collections.abc import Callable

    from ..changes import Changesets, Pending, Settlement
    from ..changes.settling import WriteDecider
    from ..changes.store import SessionStore
    from ..config import Config
    from ..policy import PolicyEngine
    from ..sandbox import Sandbox
    from ..sandbox.base import Attachment, Result
    from ..state.events import AuditEvent

    Launch = Callable[[Attachment], Result]

# How many held paths the one line after the run names (the rest: `agentvisor changes`).
SHOWN = 3


def wanted(config: Config, backend: str | None) -> bool:
    """Whether the run goes through a changeset: ``workspace.mode`` is not direct and the
    backend is bwrap (its mount step puts the overlay in place)."""
    return config.workspace.mode != "direct" and (backend or config.sandbox.backend) == "bwrap"


def changesets_for(
    config: Config, sandbox: Sandbox, say: Callable[[str], None]
) -> Changesets | None:
    """The workspace's changesets for this run, or None to write directly: ``direct`` mode,
    or a backend that cannot mount one (the default mode then falls back with a warning, a
    mode the config chose is refused, as for a gateway; `changes.settling.for_sandbox`)."""
    from ..changes.settling import for_sandbox

    name = sandbox.backend.name
    warnings: list[str] = []
    changesets = for_sandbox(
        config,
        sandbox.workspace,
        unavailable=None if name == "bwrap" else f"the bwrap sandbox (the backend is {name})",
        warnings=warnings,
        quota_bytes=sandbox.changeset_quota_bytes(),
    )
    for warning in warnings:
        say(f"agentvisor: warning: {warning}")
    return changesets


def run_over(
    changesets: Changesets,
    engine: PolicyEngine,
    attachment: Attachment | None,
    launch: Launch,
    *,
    audit: Callable[[list[AuditEvent]], None],
    say: Callable[[str], None],
) -> Result:
    """``launch`` the command with a fresh changeset over the workspace, then settle it
    once: the safe changes applied, the rest held (one line on stderr says what waits).
    ``audit`` receives the events of the settle (an apply, a hold)."""
    import secrets

    from ..actions import Context
    from ..changes.settling import write_policy
    from ..records import replace
    from ..sandbox.base import Attachment
    from ..sandbox.view import OverlayChannel

    run_id = f"exec-{secrets.token_hex(6)}"
    session = changesets.start(run_id)
    live = session.hold_live()  # `agentvisor changes` sees the run as running
    channel = OverlayChannel(str(session.upper), str(session.work))
    try:
        return launch(replace(attachment or Attachment(), overlay=channel.overlay))
    finally:
        channel.close()
        if _written(session):
            # The operator's write policy judges each changed path; an ask holds it.
            context = Context(session=run_id, tool="exec", workspace=str(changesets.workspace))
            decide = write_policy(engine, context)
            _settle(changesets, session, decide, audit=audit, say=say)
        else:  # nothing to scan, judge or apply
            session.remove()
        os.close(live)


def _written(session: SessionStore) -> bool:
    """Whether the run left anything in its upper layer (a deletion is a whiteout there)."""
    with os.scandir(session.upper) as entries:
        return next(entries, None) is not None


def _settle(
    changesets: Changesets,
    session: SessionStore,
    decide: WriteDecider,
    *,
    audit: Callable[[list[AuditEvent]], None],
    say: Callable[[str], None],
) -> None:
    """Apply what may be applied, hold the rest, record it, say what waits."""
    from ..changes.settling import settle_recorded

    settlement, events = settle_recorded(changesets, session, decide)
    _record(audit, events, say)
    line = _outcome(session, settlement, [e.reason or "" for e in events if e.decision == "error"])
    if settlement is not None and not settlement.held:
        session.remove()  # nothing waits (`finish` would scan the changeset again to know)
    else:
        changesets.finish(session)
    if line:
        say(f"agentvisor: {line}")


def _record(
    audit: Callable[[list[AuditEvent]], None],
    events: list[AuditEvent],
    say: Callable[[str], None],
) -> None:
    from ..errors import AgentvisorError

    if not events:
        return
    try:
        audit(events)
    except AgentvisorError as exc:  # the changes are settled either way; say so
        say(f"agentvisor: warning: the audit log did not record this run's changes: {exc}")


def _outcome(session: SessionStore, settlement: Settlement | None, errors: list[str]) -> str:
    """One line: what waits for a person and how to review it ('' when nothing does: the
    run's changes, if any, are in the workspace)."""
    from ..changes import QUOTA_REACHED, topmost

    parts = list(dict.fromkeys(errors))
    held: list[Pending] = topmost(settlement.held) if settlement is not None else []
    if held:
        shown = ", ".join(p.path for p in held[:SHOWN]) + (", ..." if len(held) > SHOWN else "")
        full = any(p.reason == QUOTA_REACHED for p in held)
        why = f"{QUOTA_REACHED}; " if full else ""
        parts.append(
            f"{len(held)} change(s) held for a person ({shown}): {why}review with "
            f"agentvisor changes, agentvisor diff --session {session.id}, then agentvisor "
            f"apply --session {session.id} (or discard)"
        )
    elif parts:
        parts[-1] += "; see agentvisor changes"
    return "; ".join(parts)
