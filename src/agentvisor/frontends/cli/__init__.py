"""The ``agentvisor`` command line: a thin shell over the Python API.

Each subcommand lives in its own module with ``register(subparsers)`` and keeps heavy
imports inside its handler, so ``agentvisor --help`` and ``agentvisor exec`` start fast.
To add a command, write ``cli/NAME.py`` and list it in ``SUBCOMMANDS``.

``agentvisor exec`` reads its options by hand when it can (`exec.quick_args`) and first
offers the command to a running gateway or exec helper (`agentvisor.exec.client`), before
even argparse is imported; without one it runs in this process.
"""

from __future__ import annotations

import importlib
import os
import sys

from ...errors import AgentvisorError
from ...exec.request import EXIT_REFUSED

TYPE_CHECKING = False  # the typing module alone costs milliseconds at every start
if TYPE_CHECKING:
    import argparse

SUBCOMMANDS = (
    "exec",
    "doctor",
    "demo",
    "fetch",
    "run",
    "mcp",
    "serve",
    "check",
    "grant",
    "tool",
    "import-hermes",
    "log",
    "trust",
    "upstreams",
    "scope",
    "exec-helper",
    "changes",
)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that subcommand (importing every subcommand module
    costs more than running `agentvisor exec` itself)."""
    import argparse

    class VersionAction(argparse.Action):
        """Looks the version up only when asked (see `agentvisor.version`)."""

        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: object,
            values: object,
            option_string: str | None = None,
        ) -> None:
            from ... import version

            print(f"agentvisor {version()}")
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


# A reader that went away (`agentvisor check ... | head`): the status of a program that
# SIGPIPE ended, as the shell reports it.
EXIT_BROKEN_PIPE = 128 + 13
EXIT_FAILED = 1
EXIT_INTERRUPTED = 128 + 2  # SIGINT, as the shell reports a program it ended


def main(argv: list[str] | None = None) -> int:
    try:
        try:
            return _main(sys.argv[1:] if argv is None else argv)
        finally:
            sys.stdout.flush()  # here, not at exit, where a broken pipe is a traceback
    except BrokenPipeError:
        # Stop quietly, as other command-line tools do; what is left for stdout goes
        # nowhere (Python flushes it again at exit).
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:  # Ctrl-C while the command was still being set up
        return EXIT_INTERRUPTED


def _main(argv: list[str]) -> int:
    if argv[:1] == ["exec"]:
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
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        raise  # main() ends quietly on it
    except Exception as exc:  # not agentvisor's own (a path too long, a number too big)
        if os.environ.get("AGENTVISOR_DEBUG"):
            raise
        command = getattr(args, "command", None) or "exec"
        print(f"agentvisor {command}: {_reason(exc)}", file=sys.stderr)
        return EXIT_FAILED


def _reason(exc: BaseException) -> str:
    """One line for a person: what failed, without a stack (AGENTVISOR_DEBUG=1 shows it)."""
    if isinstance(exc, OSError) and exc.strerror:
        where = f": {str(exc.filename)[:200]}" if exc.filename else ""
        return f"{exc.strerror}{where}"
    text = (str(exc).splitlines() or [""])[0][:300]
    return f"{text} ({type(exc).__name__})" if text else type(exc).__name__
