"""The ``agentvisor`` command line: a thin shell over the Python API.

Each subcommand lives in its own module with ``register(subparsers)`` and keeps heavy
imports inside its handler, so ``agentvisor --help`` and ``agentvisor exec`` start fast.
To add a command, write ``cli/NAME.py`` and list it in ``SUBCOMMANDS``.

``agentvisor exec`` first offers the command to a running gateway (`fastexec`), before
even argparse is imported; without one it runs in this process.
"""

from __future__ import annotations

import importlib
import sys

from ...errors import AgentvisorError

TYPE_CHECKING = False  # the typing module alone costs milliseconds at every start
if TYPE_CHECKING:
    import argparse

# Exit status when agentvisor itself refuses or fails (the command's own status otherwise).
EXIT_REFUSED = 125

SUBCOMMANDS = (
    "exec",
    "doctor",
    "demo",
    "fetch",
    "mcp",
    "serve",
    "check",
    "grant",
    "tool",
    "import-hermes",
    "log",
    "upstreams",
    "exec-helper",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that subcommand (importing every subcommand module
    costs more than running `agentvisor exec` itself)."""
    import argparse

    class VersionAction(argparse.Action):
        """Looks the version up only when asked: importlib.metadata is slow to import."""

        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: object,
            values: object,
            option_string: str | None = None,
        ) -> None:
            from importlib.metadata import PackageNotFoundError, version

            try:
                print(f"agentvisor {version('agentvisor')}")
            except PackageNotFoundError:
                print("agentvisor (version unknown)")
            parser.exit()

    parser = argparse.ArgumentParser(
        prog="agentvisor",
        description="An independent security layer for AI agents: commands run in a sandbox "
        "with no network and no secrets; every action passes one policy.",
    )
    parser.add_argument("--version", action=VersionAction, nargs=0, help="print the version")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in (only,) if only in SUBCOMMANDS else SUBCOMMANDS:
        importlib.import_module(f"{__name__}.{name.replace('-', '_')}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["exec"]:
        from .fastexec import via_gateway

        status = via_gateway(argv)
        if status is not None:
            return status
        from .exec import quick_args

        args = quick_args(argv[1:])
        if args is not None:
            return _handle(args)
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    return _handle(args)


def _handle(args: argparse.Namespace) -> int:
    try:
        return int(args.handler(args) or 0)
    except AgentvisorError as exc:
        print(f"agentvisor: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except KeyboardInterrupt:
        return 130
