"""``agentvisor exec-helper``: the background helper `agentvisor exec` starts for itself."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "exec-helper",
        help="the background helper that serves `agentvisor exec` (started by it)",
        description="Serve `agentvisor exec` from a resident process, so each run skips "
        "Python's start-up. `agentvisor exec` starts one when no gateway runs; it exits "
        "after gateway.exec_helper_idle seconds without a run.",
    )
    p.add_argument(
        "--idle",
        type=float,
        metavar="S",
        help="exit after S seconds without a run (default: gateway.exec_helper_idle)",
    )
    p.add_argument("--stop", action="store_true", help="end the running helper")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ...exec import client, helper

    if args.stop:
        pid = client.stop_running()
        print(
            f"agentvisor: stopped the exec helper {pid}"
            if pid
            else "agentvisor: no exec helper is running",
            file=sys.stderr,
        )
        return 0
    idle = args.idle
    if idle is None:
        from ...config import load_config

        idle = load_config().gateway.exec_helper_idle
    if idle <= 0:
        print("agentvisor: the exec helper is off (gateway.exec_helper_idle is 0)", file=sys.stderr)
        return 0
    return helper.serve(idle)
