"""`agentvisor grant`, `agentvisor grants`, `agentvisor revoke`: the operator's scoped
grants (see grants.py). These commands are for the person on the host; agents cannot
reach the grants file, and the policy asks before an agent runs them."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from ...actions import KINDS

if TYPE_CHECKING:
    from ...state.grants import Grant, GrantStore

EXIT_BAD_INPUT = 2


def register(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser(
        "grant",
        help="allow something for a while, optionally for one session",
        description="Add a grant: a temporary allow rule made by the operator. PATTERN uses "
        "the rule language of its KIND (docs/policy.md). The grant expires by itself.",
    )
    g.add_argument("kind", choices=KINDS, metavar="KIND", help=", ".join(KINDS))
    g.add_argument(
        "pattern",
        nargs="+",
        metavar="PATTERN",
        help="the pattern, as one argument; for exec also a command's words (after --), "
        "which become the pattern with their shell quoting: `-- git reset --hard HEAD~3`",
    )
    g.add_argument("--session", help="only for this session id")
    g.add_argument(
        "--for",
        dest="duration",
        default="1h",
        help="how long it lasts, e.g. 30m, 2h, 1d (default 1h)",
    )
    g.add_argument("--reason", help="why (kept with the grant and shown in decisions)")
    _config_option(g)
    g.set_defaults(handler=run_grant)

    ls = sub.add_parser(
        "grants",
        help="list grants",
        description="List active grants (with --all also expired and revoked ones).",
    )
    ls.add_argument("--all", action="store_true", help="include expired and revoked grants")
    ls.add_argument("--json", action="store_true", help="one JSON object per line")
    _config_option(ls)
    ls.set_defaults(handler=run_list)

    rv = sub.add_parser("revoke", help="remove a grant", description="Remove a grant by id.")
    rv.add_argument("id")
    _config_option(rv)
    rv.set_defaults(handler=run_revoke)


def _config_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config", metavar="FILE", help="config file (its state.url says where grants are kept)"
    )


def _store(args: argparse.Namespace) -> GrantStore:
    from ...approvals import check_grant_pattern
    from ...config import load_config
    from ...state.grants import GrantStore

    return GrantStore.from_config(load_config(args.config), check_pattern=check_grant_pattern)


def run_grant(args: argparse.Namespace) -> int:
    from ...errors import ConfigError
    from ...state.grants import parse_duration

    try:
        pattern = _pattern(args.kind, args.pattern)
        duration = parse_duration(args.duration)
        grant = _store(args).add(args.kind, pattern, args.session, duration, args.reason)
    except (ValueError, ConfigError) as exc:
        print(f"agentvisor grant: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    scope = f" for session {grant.session}" if grant.session else ""
    print(
        f"{grant.id}: allow {grant.kind} {grant.pattern!r}{scope} until {_when(grant.expires_at)}"
    )
    return 0


def _pattern(kind: str, words: list[str]) -> str:
    """One argument is the pattern; several are a command's words (exec only), written as
    a shell would need them, which is how the exec patterns read."""
    if len(words) == 1:
        return words[0]
    if kind != "exec":
        raise ValueError(f"a {kind} pattern is one argument (got {len(words)}); quote it")
    import shlex

    return shlex.join(words)


def run_list(args: argparse.Namespace) -> int:
    store = _store(args)
    grants = store.all() if args.all else store.active()
    for g in grants:
        if args.json:
            print(json.dumps(g.as_dict()))
            continue
        state = "" if g.active() else f"  ({_ended(g)})"
        scope = f"  session={g.session}" if g.session else ""
        why = f"  reason={g.reason!r}" if g.reason else ""
        print(f"{g.id}  {g.kind:6} {g.pattern!r}{scope}  until {_when(g.expires_at)}{why}{state}")
    if not grants and not args.json:
        print("no grants")
    return 0


def run_revoke(args: argparse.Namespace) -> int:
    if not _store(args).revoke(args.id):
        print(f"agentvisor revoke: no grant {args.id!r}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"revoked {args.id}")
    return 0


def _ended(grant: Grant) -> str:
    if grant.revoked_at is None:
        return "expired"
    return f"revoked {_when(grant.revoked_at)} by {grant.revoked_by}"


def _when(stamp: float | None) -> str:
    return "revoked" if stamp is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(stamp))
