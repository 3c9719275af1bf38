"""``agentvisor log``: read the audit log; ``agentvisor log verify``: check its hash chain.

The log is the database of ``audit.url`` (the config file's, or ``--url``). Filters
combine; ``--json`` prints one JSON object per line for scripts (every event); ``--follow``
keeps printing new events from every gateway that writes to the same database. The table
leaves out lifecycle events (sessions opened and closed, sandboxes started and ended), which
outnumber the calls; ``--all`` shows them.

Every call that runs has an ``intent`` event written before it runs and a ``call`` event
(its outcome) after. The table folds an intent into its outcome; an intent with no outcome
is shown, marked as such (JSON: ``"no_outcome": true``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from ...state.asks import visible

EXIT_BROKEN = 1
EXIT_BAD_INPUT = 2
LIFECYCLE = "sandbox"  # the kind of lifecycle events
_HEADER = (
    f"{'#':<7} {'time':<19}  {'kind':<9} {'session':<16} {'agent':<12} {'tool':<14} "
    f"{'decision':<8} details"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "log",
        help="show the audit log (or: log verify, log prune)",
        description="Show audit events: tool calls, decisions with their rule and reason, "
        "approval requests and answers, grant changes and sandbox lifecycle events. "
        "`agentvisor log verify` checks the hash chain and names the first broken event.",
    )
    _common(p, None)
    p.add_argument("--session", help="only this session id")
    p.add_argument(
        "--since",
        help="only events after this: a duration ago (30m, 2h, 1d) "
        "or a date/time (2025-01-31, 2025-01-31T14:00, 14:00 today)",
    )
    p.add_argument("--decision", help="only this decision (allow, deny, ask, error, grant, revoke)")
    p.add_argument(
        "--kind",
        help="only this kind (intent, call, network, approval, grant, sandbox, login, "
        "retention, changes)",
    )
    p.add_argument(
        "--limit", type=int, default=100, help="at most this many (the newest; default 100)"
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="show lifecycle events too (sessions opened and closed, sandboxes started "
        "and ended; the table leaves them out)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per line, every event")
    p.add_argument(
        "--follow", "-f", action="store_true", help="keep printing new events (Ctrl-C stops)"
    )
    p.set_defaults(handler=run_show)
    actions = p.add_subparsers(dest="log_action", metavar="ACTION")
    v = actions.add_parser(
        "verify",
        help="check the hash chain",
        description="Recompute every event's hash from its content and "
        "the previous event's hash, from the retention checkpoint to the "
        "chain head. Exit status 1 names the first broken event.",
    )
    _common(v, argparse.SUPPRESS)
    v.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the result as JSON"
    )
    v.set_defaults(handler=run_verify)
    pr = actions.add_parser(
        "prune",
        help="delete events older than the retention period",
        description="Apply audit.retention_days now (or --days). The "
        "chain stays verifiable from a checkpoint of the last deleted "
        "event.",
    )
    _common(pr, argparse.SUPPRESS)
    pr.add_argument("--days", type=float, help="instead of audit.retention_days")
    pr.set_defaults(handler=run_prune)


def _common(p: argparse.ArgumentParser, default: Any) -> None:
    p.add_argument(
        "--config",
        metavar="FILE",
        default=default,
        help="config file, used alone (default: user config, project agentvisor.yaml over it)",
    )
    p.add_argument(
        "--url", default=default, help="the audit database URL (default: audit.url from the config)"
    )


def _store(args: argparse.Namespace) -> Any:
    from ...config import load_config
    from ...state import AuditStore

    config = load_config(getattr(args, "config", None))
    url = getattr(args, "url", None) or config.audit.url
    return AuditStore.open(url, config.audit.retention_days), config


def run_show(args: argparse.Namespace) -> int:
    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        print(f"agentvisor log: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    store, _ = _store(args)
    filters = {"session": args.session, "decision": args.decision, "kind": args.kind}
    # The table hides lifecycle events unless asked for them (--all, or --kind sandbox).
    shown = _everything if args.json or args.all or args.kind else _not_lifecycle
    events, hidden = _newest(store, since, args.limit, filters, shown)
    if not args.json and (events or args.follow):
        print(_HEADER, flush=True)
    intents = [e.ref for e in events if e.kind == "intent" and e.ref]
    finished = store.finished(intents) if intents else set()
    for event in events:
        if event.kind != "intent":
            _print(event, args.json)
        elif event.ref not in finished:
            _print(event, args.json, no_outcome=True)
        elif args.json or args.kind == "intent":
            _print(event, args.json)
    if hidden and not args.json:
        print(f"({hidden} lifecycle events not shown; --all shows them)", file=sys.stderr)
    if not args.follow:
        if not events and not args.json:
            print("no events", file=sys.stderr)
        return 0
    last = events[-1].seq if events else store.latest_seq()
    try:
        for event in store.follow(after_seq=last, **{k: v for k, v in filters.items() if v}):
            if shown(event):
                _print(event, args.json)
    except KeyboardInterrupt:
        return 0
    return 0


def _everything(event: Any) -> bool:
    return True


def _not_lifecycle(event: Any) -> bool:
    return bool(event.kind != LIFECYCLE)


def _newest(
    store: Any,
    since: float | None,
    limit: int,
    filters: dict[str, Any],
    shown: Callable[[Any], bool],
) -> tuple[list[Any], int]:
    """The newest ``limit`` events that ``shown`` keeps, and how many it left out among
    them: asks the store for more until enough are kept or there are no more."""
    if limit <= 0:
        return [], 0
    fetch = limit
    while True:
        events = store.events(since=since, limit=fetch, **filters)
        kept = [event for event in events if shown(event)]
        everything = len(events) < fetch  # the store has no more
        if len(kept) >= limit or everything:
            # Left out: among all events when all are shown, else after the first row.
            start = kept[-limit].seq if len(kept) > limit or not everything else 0
            kept = kept[-limit:]
            return kept, sum(1 for e in events if not shown(e) and e.seq > start)
        fetch *= 4


def run_verify(args: argparse.Namespace) -> int:
    from ...records import asdict

    store, _ = _store(args)
    result = store.verify()
    if getattr(args, "json", False):
        print(json.dumps(asdict(result)))
    elif result.ok:
        print(f"audit log {store.db.shown}: {result.message}")
        if result.unfinished:
            print("  agentvisor log --kind intent shows them, marked NO OUTCOME")
    else:
        print(
            f"audit log {store.db.shown}: BROKEN at event #{result.first_bad}: "
            f"{result.message} ({result.checked} events before it verified)"
        )
    return 0 if result.ok else EXIT_BROKEN


def run_prune(args: argparse.Namespace) -> int:
    store, config = _store(args)
    days = args.days if args.days is not None else config.audit.retention_days
    if days is None or days <= 0:
        print(
            "agentvisor log prune: set audit.retention_days or pass --days N (N > 0)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    count = store.prune(days)
    print(f"pruned {count} events older than {days:g} days")
    return 0


def parse_since(text: str, now: float | None = None) -> float:
    """A duration ago (``30m``) or a local date/time (``2025-01-31T14:00``, ``14:00``)."""
    import datetime

    from ...state.grants import parse_duration

    now = time.time() if now is None else now
    try:
        return now - parse_duration(text)
    except ValueError:
        pass
    try:
        if len(text) <= 5 and ":" in text:  # HH:MM today
            clock = datetime.time.fromisoformat(text)
            day = datetime.datetime.fromtimestamp(now).date()
            return datetime.datetime.combine(day, clock).timestamp()
        return datetime.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise ValueError(
            f"--since {text!r}: write a duration (30m, 2h, 1d) or a date/time "
            "(2025-01-31, 2025-01-31T14:00, 14:00)"
        ) from None


NO_OUTCOME = "NO OUTCOME recorded: still running, or the gateway stopped or could not write"


def _print(event: Any, as_json: bool, no_outcome: bool = False) -> None:
    if as_json:
        data = event.as_dict() | ({"no_outcome": True} if no_outcome else {})
        print(json.dumps(data, ensure_ascii=False), flush=True)
    else:
        if no_outcome:
            event.result = NO_OUTCOME
        # Commands, their output and names come from agents: shown, never obeyed.
        print(visible(format_row(event)), flush=True)


def format_row(e: Any) -> str:
    """One readable line: position, time, kind, session, agent, tool, decision, who/why,
    what (the columns of `_HEADER`)."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(e.time))
    who = []
    if e.rule:
        who.append(f"rule={e.rule}")
    if e.approver:
        who.append(f"by={e.approver}" + (f" via {e.channel}" if e.channel else ""))
    what = _what(e)
    if e.reason and e.decision in ("deny", "ask"):
        what += f"  ({e.reason})"
    if e.duration is not None:
        what += f"  [{e.duration * 1000:.0f} ms]"
    return (
        f"#{e.seq:<6} {stamp}  {e.kind:<9} {_cut(e.session or '-', 16):<16} "
        f"{_cut(e.agent or '-', 12):<12} {_cut(e.tool or '-', 14):<14} "
        f"{_cut(e.decision or '-', 8):<8} {' '.join(who)}{'  ' if who else ''}{what}"
    )


def _what(e: Any) -> str:
    parts = []
    if e.arguments:
        args = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in e.arguments.items())
        parts.append(_cut(args, 120))
    if e.result:
        parts.append(_cut(e.result, 120))
    return " → ".join(parts)


def _cut(text: str, width: int) -> str:
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"
