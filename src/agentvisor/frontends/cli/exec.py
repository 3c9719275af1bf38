"""``agentvisor exec -- CMD [ARG...]``: run one command in a fresh sandbox.

stdin, stdout and stderr pass through. The exit status is the command's own, 124 when
the timeout ended it, and 125 (with a one-line reason on stderr) when agentvisor
itself refused or failed.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing and argparse cost milliseconds on every `exec` (see quick_args)
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any

    from ...approvals import ApprovalBroker
    from ...config import Config
    from ...policy import PolicyEngine
    from ...sandbox import Sandbox


def register(sub: argparse._SubParsersAction) -> None:
    import argparse

    p = sub.add_parser(
        "exec",
        help="run a command in a fresh sandbox",
        description="Run CMD in a fresh sandbox with the workspace as current directory: no "
        "network, no secrets, writes only in the workspace. Exit status: CMD's own, 124 on "
        "timeout, 125 when agentvisor refuses or fails.",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        help="config file, used alone (default: user config, project agentvisor.yaml over it)",
    )
    p.add_argument(
        "--workspace", metavar="DIR", help="writable workspace (default: the current directory)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="wall-clock limit in seconds (default: sandbox.timeout)",
    )
    p.add_argument(
        "--network",
        choices=("none", "proxy"),
        help="none: loopback only; proxy: "
        "only through agentvisor's egress proxy (default: sandbox.network)",
    )
    p.add_argument(
        "--backend",
        choices=("bwrap", "docker", "local"),
        help="sandbox backend for this run (default: sandbox.backend)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print the sandbox command line instead of running it",
    )
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD [ARG...]")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import os

    environ = dict(os.environ)
    helper_idle: list[float] = []
    try:
        return execute(
            args,
            cwd=os.getcwd(),
            environ=environ,
            say=lambda text: print(text, file=sys.stderr, flush=True),
            config_seen=lambda config: helper_idle.append(config.gateway.exec_helper_idle),
        )
    finally:
        if helper_idle and not args.dry_run:
            from ...exechelper import spawn

            # The next `agentvisor exec` then skips this whole start (docs/gateway.md).
            spawn(helper_idle[0], environ)


def execute(
    args: argparse.Namespace,
    *,
    cwd: str,
    environ: dict[str, str],
    say: Callable[[str], None],
    stdio: Sequence[int] | None = None,
    cancel_fd: int | None = None,
    broker: ApprovalBroker | None = None,
    reuse: Callable[[tuple[object, ...], Callable[[], Any]], Any] | None = None,
    config_seen: Callable[[Config], None] | None = None,
) -> int:
    """The whole of ``exec`` for a caller in ``cwd`` with ``environ``: in this process, or
    in the gateway's exec server on behalf of a CLI (``stdio``: the client's terminal).

    ``reuse(key, make)`` lets a long-lived caller keep the sandbox and the policy engine
    between runs with the same inputs (the exec server does); ``config_seen`` is told the
    config once it is loaded."""

    def made(key: tuple[object, ...], make: Callable[[], Any]) -> Any:
        return reuse(key, make) if reuse is not None else make()

    import os

    from ...config import load_config
    from ...errors import ConfigError
    from ...policy import PolicyEngine
    from ...sandbox import Sandbox

    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise ConfigError("exec needs a command: agentvisor exec -- CMD [ARG...]")
    config = load_config(args.config, cwd=cwd, environ=environ)
    if config_seen is not None:
        config_seen(config)
    sandbox_cfg = config.sandbox
    if args.network:
        sandbox_cfg = sandbox_cfg.model_copy(update={"network": args.network})
    if args.timeout is not None:
        if args.timeout <= 0:
            raise ConfigError("--timeout must be greater than 0")
        sandbox_cfg = sandbox_cfg.model_copy(update={"timeout": args.timeout})
    workspace = os.path.join(cwd, args.workspace) if args.workspace else cwd
    # Config sections hold lists (unhashable); their repr shows every value.
    sandbox = made(
        ("sandbox", repr(sandbox_cfg), workspace, args.backend, tuple(environ.items())),
        lambda: Sandbox(sandbox_cfg, workspace=workspace, backend=args.backend, environ=environ),
    )
    for warning in sandbox.warnings:
        say(f"agentvisor: warning: {warning}")
    if args.dry_run:
        if not hasattr(sandbox.backend, "dry_run"):
            raise ConfigError(f"--dry-run is not available for the {sandbox.backend.name} backend")
        import shlex

        print(shlex.join(sandbox.backend.dry_run(argv)))
        return 0
    engine = made(("policy", repr(config)), lambda: PolicyEngine.from_config(config))
    check_policy(config, argv, sandbox, broker, engine)
    proxy = None
    if sandbox_cfg.network == "proxy":
        from ...net.proxy import EgressProxy

        proxy = EgressProxy.from_config(config).start()
    attachment = proxy.attachment() if proxy else None
    try:
        if stdio is not None and cancel_fd is not None:
            result = sandbox.run_attached(
                argv, stdio=stdio, cancel_fd=cancel_fd, attachment=attachment
            )
        else:
            result = sandbox.run(argv, capture=False, attachment=attachment)
    finally:
        if proxy is not None:
            proxy.stop()
    if result.timed_out:
        say(f"agentvisor: timed out after {sandbox_cfg.timeout:g} s; the sandbox was ended")
    elif result.limits_hit:
        say(f"agentvisor: the command hit the {', '.join(result.limits_hit)} limit")
    return result.exit_code


def check_policy(
    config: Config,
    argv: list[str],
    sandbox: Sandbox,
    broker: ApprovalBroker | None = None,
    engine: PolicyEngine | None = None,
) -> None:
    """The same decision the gateway makes for a command; an ask goes to the broker."""
    import shlex

    from ...actions import Action, Context
    from ...errors import PolicyDenied
    from ...policy import PolicyEngine

    action = Action("exec", shlex.join(argv), argv=tuple(argv))
    context = Context(tool="exec", workspace=str(sandbox.workspace))
    engine = engine or PolicyEngine.from_config(config)
    decision = engine.decide(action, context)
    if decision.verdict == "ask":
        if broker is None:
            from ...approvals import ApprovalBroker

            broker = ApprovalBroker(config)
        decision = broker.resolve(action, context, decision)
    if decision.verdict != "allow":
        rule = f" [{decision.rule}]" if decision.rule else ""
        hint = f"; to allow it: {decision.hint}" if decision.hint and not decision.hardline else ""
        raise PolicyDenied(f"refused: {decision.reason}{rule}{hint}", decision)


_VALUED = {
    "--config": None,
    "--workspace": None,
    "--timeout": None,
    "--network": ("none", "proxy"),
    "--backend": ("bwrap", "docker", "local"),
}


def quick_args(argv: list[str]) -> argparse.Namespace | None:
    """``exec``'s options read by hand, exactly as the parser in `register` reads them;
    None for anything that parser must judge (help, an unknown or abbreviated option, a
    bad value), so its messages stay the only ones. argparse costs over ten milliseconds
    on every run, more than the rest of the CLI's own start."""
    from types import SimpleNamespace

    values: dict[str, object] = {
        "config": None,
        "workspace": None,
        "timeout": None,
        "network": None,
        "backend": None,
        "dry_run": False,
    }
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        name, eq, value = argv[i].partition("=")
        if name == "--dry-run" and not eq:
            values["dry_run"] = True
            i += 1
            continue
        if name not in _VALUED:
            return None
        if not eq:
            if i + 1 >= len(argv) or argv[i + 1].startswith("-"):
                return None
            i += 1
            value = argv[i]
        choices = _VALUED[name]
        if choices is not None and value not in choices:
            return None
        values[name[2:]] = value
        i += 1
    if values["timeout"] is not None:
        try:
            values["timeout"] = float(values["timeout"])  # type: ignore[arg-type]
        except ValueError:
            return None
    return SimpleNamespace(**values, argv=argv[i:], handler=run)  # type: ignore[return-value]
