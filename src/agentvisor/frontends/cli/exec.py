"""``agentvisor exec -- CMD [ARG...]``: run one command in a fresh sandbox (its writes go
through a changeset: docs/changesets.md).

This module only reads the arguments into an `ExecRequest`; `agentvisor.exec` runs it.

stdin, stdout and stderr pass through. The exit status is the command's own, 124 when
the timeout ended it, and 125 (with a one-line reason on stderr) when agentvisor
itself refused or failed.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing and argparse cost milliseconds on every `exec` (see quick_args)
if TYPE_CHECKING:
    import argparse

    from ...exec.request import ExecRequest


def register(sub: argparse._SubParsersAction) -> None:
    import argparse

    p = sub.add_parser(
        "exec",
        help="run a command in a fresh sandbox",
        description="Run CMD in a fresh sandbox with the workspace as current directory: no "
        "network, no secrets, writes only in the workspace, through a changeset "
        "(workspace.mode): ordinary edits are applied when CMD ends, what your own tools "
        "would run later (git internals, nested repositories, agentvisor.yaml, ...) waits "
        "for review (agentvisor changes, agentvisor apply). Exit status: CMD's own, 124 on "
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
    p.add_argument(
        "--raw-output",
        action="store_true",
        help="pass CMD's output to the terminal as it is; by default, control sequences that "
        "act beyond the text (window title, clipboard, terminal queries, ...) are dropped",
    )
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD [ARG...]")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import os

    return run_request(request_from(args, cwd=os.getcwd(), environ=dict(os.environ)))


def request_from(args: argparse.Namespace, *, cwd: str, environ: dict[str, str]) -> ExecRequest:
    """The parsed options as the request every exec path takes."""
    from ...exec.request import ExecRequest

    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    return ExecRequest(
        argv=tuple(argv),
        cwd=cwd,
        environ=environ,
        config=args.config,
        workspace=args.workspace,
        timeout=args.timeout,
        network=args.network,
        backend=args.backend,
        dry_run=args.dry_run,
        raw_output=args.raw_output,
    )


def run_request(request: ExecRequest) -> int:
    """Through a running gateway or exec helper when one takes it, else in this process."""
    from ...exec.client import via_gateway

    status = via_gateway(request)
    if status is not None:
        return status
    from ...exec.run import run as run_here

    helper_idle: list[float] = []
    try:
        return run_here(
            request,
            say=lambda text: print(text, file=sys.stderr, flush=True),
            config_seen=lambda config: helper_idle.append(config.gateway.exec_helper_idle),
        )
    finally:
        if helper_idle and not request.dry_run:
            from ...exec.client import spawn

            # The next `agentvisor exec` then skips this whole start (docs/gateway.md).
            spawn(helper_idle[0], request.environ)


_FLAGS = {"--dry-run": "dry_run", "--raw-output": "raw_output"}
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
        "raw_output": False,
    }
    i = 0
    while i < len(argv) and argv[i].startswith("-") and argv[i] != "--":
        name, eq, value = argv[i].partition("=")
        if name in _FLAGS and not eq:
            values[_FLAGS[name]] = True
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
