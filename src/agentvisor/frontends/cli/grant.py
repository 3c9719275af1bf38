"""`agentvisor grant`, `agentvisor grants`, `agentvisor revoke`: the operator's scoped
grants (see grants.py). These commands are for the person on the host; agents cannot
reach the grants file, and the policy asks before an agent runs them."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from ...actions import KINDS

if TYPE_CHECKING:
    from ...state.grants import Grant, GrantStore
    from ...state.refusals import Refusal

EXIT_BAD_INPUT = 2


def register(sub: argparse._SubParsersAction) -> None:
    g = sub.add_parser(
        "grant",
        help="allow something for a while, optionally for one session",
        usage="%(prog)s KIND PATTERN... [--for D] [--session S] [--reason R]\n"
        "       %(prog)s --ask ID [--for D] [--reason R] [--yes]",
        description="Add a grant: a temporary allow rule made by the operator. PATTERN uses "
        "the rule language of its KIND (docs/policy.md). With --ask, the grant is made of a "
        "refused request, by the id its refusal names: what the id stands for is shown "
        "first, and you are asked to confirm. The grant expires by itself.",
    )
    kind = g.add_argument("kind", choices=KINDS, metavar="KIND", help=", ".join(KINDS))
    pattern = g.add_argument(
        "pattern",
        nargs="+",
        metavar="PATTERN",
        help="the pattern, as one argument; for exec also a command's words (after --), "
        "which become the pattern with their shell quoting: `-- git reset --hard HEAD~3`",
    )
    g.add_argument(
        "--ask",
        metavar="ID",
        action=_StandsFor,
        replaces=(kind, pattern),
        help="grant the request an agent was refused, by the id in its refusal (for "
        "requests whose words need awkward quoting); bound to that request's session",
    )
    g.add_argument("--yes", action="store_true", help="with --ask: grant without asking to confirm")
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


class _StandsFor(argparse.Action):
    """An option that stands for required positionals (``--ask ID`` for KIND PATTERN):
    once given, they are no longer required."""

    def __init__(self, *args: Any, replaces: tuple[argparse.Action, ...], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.replaces = replaces

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, values)
        for action in self.replaces:
            action.required = False


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
    from ...errors import ConfigError, NotGrantable
    from ...state.grants import parse_duration

    try:
        if args.ask is not None:
            return _grant_refusal(args)
        if args.kind is None or not args.pattern:
            raise ValueError("give KIND and PATTERN, or --ask ID (see --help)")
        pattern = _pattern(args.kind, args.pattern)
        duration = parse_duration(args.duration)
        grant = _store(args).add(args.kind, pattern, args.session, duration, args.reason)
    except (ValueError, ConfigError, NotGrantable) as exc:
        print(f"agentvisor grant: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    _print_grant(grant)
    return 0


def _print_grant(grant: Grant) -> None:
    scope = f" for session {grant.session}" if grant.session else ""
    # repr: the pattern's quotes and control characters shown as what they are.
    print(
        f"{grant.id}: allow {grant.kind} {grant.pattern!r}{scope} until {_when(grant.expires_at)}"
    )


def _grant_refusal(args: argparse.Namespace) -> int:
    """`grant --ask ID`: show the person exactly what the id stands for, have them confirm,
    then grant its patterns for its session. The id came from an agent: what is granted
    is what the refusal recorded, never what the agent says it is."""
    from ...config import load_config
    from ...state.db import database, default_url
    from ...state.grants import parse_duration
    from ...state.refusals import RefusalStore

    if args.kind is not None or args.pattern or args.session:
        raise ValueError(
            "--ask ID grants what that refusal recorded, for its session: give no KIND, "
            "PATTERN or --session with it"
        )
    duration = parse_duration(args.duration)
    config = load_config(args.config)
    refusals = RefusalStore(database(config.state.url or config.audit.url or default_url()))
    refused = refusals.grantable(args.ask)
    print(_describe(refused, duration), flush=True)
    if not args.yes and not _confirmed():
        print("not granted")
        return 1
    made = refusals.grant(refused, _store(args), duration, args.reason)
    for grant in made:
        _print_grant(grant)
    return 0


def _describe(refused: Refusal, duration: float) -> str:
    """What a refusal's id stands for and what granting it allows, every character shown
    as what it is (an agent wrote these words)."""
    who = ", ".join(
        f"{k} {v}"
        for k, v in (("session", refused.session), ("agent", refused.agent), ("tool", refused.tool))
        if v
    )
    lines = [
        f"{refused.id} is a request agentvisor refused at {_when(refused.created_at)}:",
        f"  {refused.kind}: {_visible(refused.target)}",
        f"  why:  {_visible(refused.reason)}" + (f" (rule {refused.rule})" if refused.rule else ""),
    ]
    if who:
        lines.append(f"  from: {_visible(who)}")
    scope = f"session {refused.session}" if refused.session else "every session"
    until = _when(time.time() + duration)
    lines.append(f"Granting it allows, for {_visible(scope)} until {until}:")
    lines += [f"  {refused.kind} {_visible(pattern)}" for pattern in refused.patterns]
    shown = [refused.target, refused.reason, who, *refused.patterns]
    if any(_visible(text) != text for text in shown):
        lines.append(
            "(characters a terminal would not show as themselves are written as escapes "
            "such as \\n, \\x1b or \\u202e, and a backslash as \\\\)"
        )
    return "\n".join(lines)


def _confirmed() -> bool:
    """The person's yes, typed on a terminal; anything else (no terminal, EOF, Ctrl-C) is
    a no. An agent's pipe is not a person: without a terminal, --yes is required."""
    if not sys.stdin.isatty():
        print(
            "agentvisor grant: not on a terminal, so nobody can confirm: read what it "
            "stands for above, then run it again with --yes",
            file=sys.stderr,
        )
        return False
    try:
        answer = input("Grant it? [y/N] ")
    except (EOFError, KeyboardInterrupt):
        print()
        return False
    return answer.strip().lower() in ("y", "yes")


def _visible(text: str) -> str:
    """``text`` with every character a terminal would not show as itself (newlines,
    escapes, bidirectional overrides, odd spaces) written as an escape, and backslashes
    doubled so an escape cannot be faked."""
    return "".join(
        ch if ch.isprintable() and ch != "\\" else ch.encode("unicode_escape").decode("ascii")
        for ch in text
    )


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
