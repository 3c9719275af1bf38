"""``agentvisor scope``: a person declares what one session's task is about.

    agentvisor scope SESSION                                   show its declared scope
    agentvisor scope SESSION --add recipient=bob@example.com   add a value (repeatable)
    agentvisor scope SESSION --clear                           forget it

The flow guard lets a value the session read in untrusted text flow into a write when
the person named it here. The scopes are kept in the state directory
(``session-scopes.json``), which no sandbox sees; no tool an agent can call writes them.
"""

from __future__ import annotations

import argparse
import json

from ...errors import ConfigError
from ...state.scopes import FIELDS


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "scope",
        help="declare a session's task scope (recipients, hosts, accounts, request)",
        description="Show or widen the task scope of one session: the values the flow guard "
        "lets the agent send or write although it read them in content an outsider "
        "controls. For the person on the host; agents cannot reach it.",
    )
    p.add_argument("session", help="the session id (as `agentvisor log` shows it)")
    p.add_argument(
        "--add",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help=f"add a value; FIELD is one of {', '.join(FIELDS)} (request: the person's "
        "own words; every address, host or number in them is in scope)",
    )
    p.add_argument("--clear", action="store_true", help="forget the session's declared scope")
    p.add_argument("--json", action="store_true", help="print the scope as JSON")
    p.add_argument(
        "--config", metavar="FILE", help="config file (its audit.url says where changes are logged)"
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ...state.scopes import ScopeStore

    store = ScopeStore.default()
    if args.clear:
        if args.add:
            raise ConfigError("--clear and --add: choose one")
        cleared = store.clear(args.session)
        if cleared:
            _audit(args, f"task scope of {args.session} cleared", {})
        print(f"{args.session}: scope cleared" if cleared else f"{args.session}: no scope")
        return 0
    scope = store.get(args.session)
    for item in args.add:
        field, sep, value = item.partition("=")
        if not sep or not value.strip():
            raise ConfigError(f"--add {item!r}: write FIELD=VALUE, e.g. recipient=bob@example.com")
        scope = store.add(args.session, field.strip(), [value.strip()])
        _audit(args, f"task scope of {args.session} widened", {field.strip(): value.strip()})
    if args.json:
        print(json.dumps(scope, indent=1, sort_keys=True))
    elif not scope:
        print(f"{args.session}: no scope declared")
    else:
        for field in FIELDS:
            for value in scope.get(field, []):
                print(f"{args.session}  {field}={value}")
    return 0


def _audit(args: argparse.Namespace, what: str, change: dict[str, str]) -> None:
    """A scope change is a grant by a person: it goes to the audit log like one."""
    from ...config import load_config
    from ...state import State
    from ...state.events import AuditEvent

    state = State.from_config(load_config(args.config))
    state.audit.record(
        AuditEvent(
            kind="grant",
            session=args.session,
            tool="scope",
            arguments=change,
            approver="operator",
            channel="cli",
            result=what,
        )
    )
