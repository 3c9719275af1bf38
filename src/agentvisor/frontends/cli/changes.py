"""`agentvisor changes`, `diff`, `apply`, `discard`, `undo`: a person's hands on changesets.

The agent's writes wait in its session's changeset (docs/changesets.md); these commands
show them, apply or drop them, and revert the last applied changeset. They are for the
person on the host: no tool an agent can call does any of this. Every apply, discard and
undo is an audit event listing the paths and content hashes.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from ...state.asks import visible

if TYPE_CHECKING:
    from ...changes import Changesets
    from ...changes.store import SessionStore
    from ...config import Config

EXIT_BAD_INPUT = 2


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ls = sub.add_parser(
        "changes",
        help="list pending and applied changesets",
        description="List each session's pending changes (path, kind — added, modified, "
        "deleted, mode, symlink — and why it is held) and the applied changesets (newest "
        "last). An apply a crash interrupted is finished first and reported.",
    )
    ls.add_argument("--all", action="store_true", help="every held path, not only the topmost")
    _common(ls)
    ls.set_defaults(handler=run_changes)

    diff = sub.add_parser(
        "diff",
        help="show pending changes as a diff",
        description="A unified diff of the pending changes (binary files and links are "
        "described, not shown), against the real workspace.",
    )
    diff.add_argument("paths", nargs="*", metavar="PATH", help="only these paths (and below)")
    diff.add_argument("--session", help="only this session's changes")
    _common(diff)
    diff.set_defaults(handler=run_diff)

    ap = sub.add_parser(
        "apply",
        help="apply pending changes to the workspace",
        description="Apply a session's pending changes (all, or those at or below PATH), "
        "held ones included: you are the person they waited for. Paths changed in the "
        "workspace since the session started (conflicts) stay held unless --force.",
    )
    ap.add_argument("paths", nargs="*", metavar="PATH")
    ap.add_argument("--session", help="the session (needed when several have changes)")
    ap.add_argument("--force", action="store_true", help="apply conflicts too (overwrites)")
    _common(ap)
    ap.set_defaults(handler=run_apply)

    dc = sub.add_parser(
        "discard",
        help="drop pending changes",
        description="Drop a session's pending changes (all, or those at or below PATH): "
        "they never reach the workspace.",
    )
    dc.add_argument("paths", nargs="*", metavar="PATH")
    dc.add_argument("--session", help="the session (needed when several have changes)")
    _common(dc)
    dc.set_defaults(handler=run_discard)

    un = sub.add_parser(
        "undo",
        help="revert the last applied changeset",
        description="Revert the last applied changeset (or --changeset ID): restore what "
        "it overwrote or deleted, remove what it added. A path changed again since is left "
        "as it is and reported.",
    )
    un.add_argument("--changeset", metavar="ID", help="a changeset id from `agentvisor changes`")
    _common(un)
    un.set_defaults(handler=run_undo)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workspace", metavar="DIR", help="the workspace (default: the config's, or .)")
    p.add_argument("--config", metavar="FILE", help="config file")
    p.add_argument("--json", action="store_true", help="machine-readable output")


def _open(args: argparse.Namespace) -> tuple[Changesets, Config]:
    import os

    from ...changes import Changesets, settings_from
    from ...config import load_config

    config = load_config(args.config)
    workspace = args.workspace or config.sandbox.workspace or os.getcwd()
    return Changesets(workspace, settings_from(config)), config


def _audit(
    config: Config,
    what: str,
    session: str | None,
    paths: list[dict[str, Any]],
    *,
    ref: str | None = None,
    result: str = "",
) -> None:
    from ...state import AuditStore
    from ...state.events import AuditEvent

    store = AuditStore.open(config.audit.url, config.audit.retention_days)
    store.record(
        AuditEvent(
            kind="changes",
            session=session,
            decision=what,
            approver="cli",
            arguments={"paths": paths},
            ref=ref,
            result=result,
        )
    )


def _pick_session(changesets: Changesets, wanted: str | None) -> SessionStore:
    from ...errors import ConfigError

    if wanted:
        return changesets.session(wanted)
    with_changes = [s for s in changesets.sessions() if changesets.pending(s)]
    if len(with_changes) == 1:
        return with_changes[0]
    if not with_changes:
        raise ConfigError(f"no session has pending changes in {changesets.workspace}")
    names = ", ".join(s.id for s in with_changes)
    raise ConfigError(f"several sessions have pending changes ({names}); choose with --session")


# -- changes ----------------------------------------------------------------------------------


def run_changes(args: argparse.Namespace) -> int:
    from ...changes import resume, topmost

    changesets, _ = _open(args)
    with changesets.store.locked():
        resumed = resume(changesets.store)
    changesets.prune()
    sessions = [(s, changesets.pending(s)) for s in changesets.sessions()]
    applied = changesets.applied()
    if args.json:
        print(
            json.dumps(
                {
                    "workspace": changesets.workspace,
                    "resumed": [r.id for r in resumed],
                    "pending": {s.id: [p.as_json() for p in items] for s, items in sessions},
                    "applied": [a.as_json() for a in applied],
                },
                indent=1,
            )
        )
        return 0
    for record in resumed:
        print(f"finished changeset {record.id}, which an interrupted apply left half done")
    any_pending = False
    for session, items in sessions:
        if not items:
            continue
        any_pending = True
        print(f"session {session.id}: {len(items)} pending")
        shown = items if args.all else topmost(items)
        for item in shown:
            why = item.reason or "not settled yet (applied after the next call in auto mode)"
            line = f"  {item.kind:9} {item.path}{'/' if item.entry == 'dir' else ''}  — {why}"
            print(visible(line))
        hidden = len(items) - len(shown)
        if hidden:
            print(f"  (and {hidden} more below those directories; --all lists them)")
    if not any_pending:
        print("no pending changes")
    for record in applied[-10:]:
        state = "undone" if record.undone else "applied"
        notes = []
        if record.undo_dropped:
            notes.append("undo data dropped (workspace.undo_mb)")
        if not record.complete:
            notes.append("interrupted")
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(record.time))
        print(
            f"changeset {record.id} {state} {when} session {record.session} by {record.by}: "
            f"{len(record.entries)} path(s){'; ' + '; '.join(notes) if notes else ''}"
        )
        for entry in record.entries[:5]:
            failed = f"  — not applied: {entry.error}" if entry.error else ""
            print(visible(f"  {entry.kind:9} {entry.path}{failed}"))
        if len(record.entries) > 5:
            print(f"  ... {len(record.entries) - 5} more (--json lists them)")
    return 0


# -- diff -------------------------------------------------------------------------------------


def run_diff(args: argparse.Namespace) -> int:
    changesets, _ = _open(args)
    sessions = [changesets.session(args.session)] if args.session else changesets.sessions()
    wanted = [changesets.relative(p) for p in args.paths]
    out: list[dict[str, Any]] = []
    for session in sessions:
        for item in changesets.pending(session):
            if wanted and not any(item.path == w or item.path.startswith(w + "/") for w in wanted):
                continue
            out.append(
                {"session": session.id, **item.as_json(), "diff": changesets.diff(session, item)}
            )
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    for shown in out:
        if shown["diff"]:
            sys.stdout.write(visible(shown["diff"], keep="\n\t"))
    return 0


# -- apply / discard / undo -------------------------------------------------------------------


def run_apply(args: argparse.Namespace) -> int:
    from ...changes import audit_entry

    changesets, config = _open(args)
    session = _pick_session(changesets, args.session)
    settlement = changesets.apply(session, args.paths, force=args.force)
    changesets.prune()
    applied = settlement.applied
    done = [e for e in applied.entries if not e.error] if applied else []
    failed = [e for e in applied.entries if e.error] if applied else []
    if applied is not None:
        _audit(
            config,
            "apply",
            session.id,
            [audit_entry(e) for e in done],
            ref=applied.id,
            result=f"applied changeset {applied.id} (person)",
        )
    if args.json:
        print(
            json.dumps(
                {
                    "applied": applied.as_json() if applied else None,
                    "held": [p.as_json() for p in settlement.held],
                    "undo_dropped": settlement.undo_dropped,
                },
                indent=1,
            )
        )
    else:
        if applied is not None:
            print(f"applied changeset {applied.id}: {len(done)} path(s) (undo: agentvisor undo)")
        for entry in failed:
            print(visible(f"  not applied: {entry.path}: {entry.error}"))
        for item in settlement.held:
            print(visible(f"  still held: {item.path}: {item.reason}"))
        for dropped in settlement.undo_dropped:
            print(f"  undo data of changeset {dropped} dropped (workspace.undo_mb)")
    return 0 if not failed and not settlement.held else 1


def run_discard(args: argparse.Namespace) -> int:
    changesets, config = _open(args)
    session = _pick_session(changesets, args.session)
    dropped = changesets.discard(session, args.paths)
    changesets.prune()
    _audit(
        config,
        "discard",
        session.id,
        [{"path": p.path, "kind": p.kind} for p in dropped],
        result=f"discarded {len(dropped)} path(s)",
    )
    if args.json:
        print(json.dumps([p.as_json() for p in dropped], indent=1))
    else:
        print(f"discarded {len(dropped)} pending change(s) of session {session.id}")
    return 0


def run_undo(args: argparse.Namespace) -> int:
    changesets, config = _open(args)
    result = changesets.undo(args.changeset)
    _audit(
        config,
        "undo",
        None,
        [{"path": p} for p in result.restored]
        + [{"path": p, "skipped": why} for p, why in result.skipped],
        ref=result.changeset,
        result=f"undid changeset {result.changeset}",
    )
    if args.json:
        print(
            json.dumps(
                {
                    "changeset": result.changeset,
                    "restored": result.restored,
                    "skipped": [{"path": p, "why": why} for p, why in result.skipped],
                },
                indent=1,
            )
        )
    else:
        print(f"undid changeset {result.changeset}: {len(result.restored)} path(s) restored")
        for path, why in result.skipped:
            print(visible(f"  left as it is: {path}: {why}"))
    return 0 if not result.skipped else 1
