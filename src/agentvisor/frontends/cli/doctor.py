"""``agentvisor doctor``: check this machine; non-zero exit when the backend cannot run."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "doctor",
        help="check what this machine can enforce",
        description="Check bubblewrap, user namespaces, seccomp, cgroups and Landlock, run a "
        "real sandbox, and explain anything missing. Exit status 1 when the configured "
        "backend cannot run.",
    )
    p.add_argument("--config", metavar="FILE", help="config file to check against")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ...config import load_config
    from .doctor_checks import blocking_failures, render, run_checks

    checks = run_checks(load_config(args.config))
    print(render(checks))
    failures = blocking_failures(checks)
    if failures:
        print(f"\nthe sandbox cannot run here: {', '.join(c.name for c in failures)} failed")
        return 1
    print("\nthe sandbox can run here")
    return 0
