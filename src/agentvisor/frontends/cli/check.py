"""`agentvisor check`: what would the policy decide? One JSON object on stdout.

    agentvisor check exec "git push --force"
    agentvisor check exec -- git push --force      (an argv, no shell)
    agentvisor check read ~/.ssh/id_rsa
    agentvisor check write /etc/hosts
    agentvisor check fetch https://example.com --method POST
    agentvisor check secret GITHUB_TOKEN api.github.com

Exit status 0 when the policy was evaluated (whatever it decided), 2 on bad input.
Nothing is run and nobody is asked: an ``ask`` is printed as it is. ``check fetch`` goes
through the very function the real fetch uses (`NetworkAccess.judge`): the destination
guard first (hardline and internal destinations answer ``deny``), then the policy, with the
same decision and reason.
"""

from __future__ import annotations

import argparse
import json
import sys

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from ...actions import Action, Decision
    from ...config import Config
    from ...policy import PolicyEngine

EXIT_BAD_INPUT = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check",
        help="print the policy's decision for an action, as JSON",
        description="Evaluate the policy for one action and print one JSON object: "
        '{"decision": "allow"|"ask"|"deny", "reason": ..., "rule": ..., ...}. Nothing is run '
        "and nobody is asked. Exit status 0 when evaluated, 2 on bad input.",
    )
    p.add_argument("--config", metavar="FILE", help="config file (default: the usual lookup)")
    p.add_argument("--session", help="context: the session id rules and grants match")
    p.add_argument("--agent", help="context: the agent's name")
    p.add_argument("--toolset", help="context: the toolset")
    p.add_argument(
        "--tool", help="context: the tool the action comes from (e.g. web_extract, proxy)"
    )
    p.add_argument("--workspace", help="context: the workspace (default: this directory)")
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    e = kinds.add_parser("exec", help="a shell command line, or an argv after --")
    e.add_argument("command", nargs="+", metavar="COMMAND")
    for kind in ("read", "write"):
        kinds.add_parser(kind, help=f"a path a file tool would {kind}").add_argument("path")
    f = kinds.add_parser(
        "fetch",
        help="a URL, or host:port as the egress proxy's CONNECT names it",
        description="The decision a fetch of URL would meet: the destination guard, then the "
        "policy (the context's --tool defaults to fetch, as for `agentvisor fetch`).",
    )
    f.add_argument("url")
    f.add_argument("--method", default="GET", help="HTTP method (default GET)")
    f.add_argument(
        "--resolve",
        action="store_true",
        help="also look the host name up, as the fetch would, and judge every address it "
        "has (without it a name is judged by the name alone)",
    )
    s = kinds.add_parser("secret", help="use of a secret toward a host")
    s.add_argument("name")
    s.add_argument("host")
    t = kinds.add_parser("tool", help="a named tool")
    t.add_argument("name")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ...actions import Context
    from ...config import load_config
    from ...errors import ConfigError
    from ...policy import PolicyEngine

    try:
        action = _action(args)
    except ValueError as exc:
        print(f"agentvisor check: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"agentvisor check: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    engine = PolicyEngine.from_config(config)
    if action.kind == "fetch":
        decision = _fetch_decision(engine, config, action, args)
    else:
        context = Context(
            session=args.session,
            agent=args.agent,
            toolset=args.toolset,
            workspace=args.workspace,
            tool=args.tool,
        )
        decision = engine.decide(action, context)
    out = {"kind": action.kind, "target": action.target, **decision.as_dict()}
    print(json.dumps(out, ensure_ascii=False))
    return 0


def _fetch_decision(
    engine: PolicyEngine, config: Config, action: Action, args: argparse.Namespace
) -> Decision:
    """The real fetch's own decision, asks left unanswered (`NetworkAccess.preview`)."""
    from ...net.access import NetworkAccess
    from ...net.guard import Guard

    access = NetworkAccess(engine, Guard(extra_blocked=config.network.block))
    return access.preview(
        action.target,
        method=action.method or "GET",
        tool=args.tool or "fetch",
        session=args.session,
        resolve=args.resolve,
    )


def _action(args: argparse.Namespace) -> Action:
    from ...actions import Action
    from ...policy.hosts import split_target

    kind = args.kind
    if kind == "exec":
        words = args.command
        if len(words) == 1:
            if not words[0].strip():
                raise ValueError("the command is empty")
            return Action("exec", words[0])
        import shlex

        return Action("exec", shlex.join(words), argv=tuple(words))
    if kind in ("read", "write"):
        if not args.path.strip() or "\0" in args.path:
            raise ValueError("the path is empty or has a NUL byte")
        return Action(kind, args.path)
    if kind == "fetch":
        split_target(args.url)
        if not args.method.isalpha():
            raise ValueError(f"{args.method!r} is not an HTTP method")
        return Action("fetch", args.url, method=args.method.upper())
    if kind == "secret":
        split_target(args.host)
        if not args.name.strip():
            raise ValueError("the secret's name is empty")
        return Action("secret", args.name, host=args.host)
    return Action("tool", args.name)
