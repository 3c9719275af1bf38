"""``agentvisor demo``: run real commands in the sandbox and show what is blocked and why."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "demo",
        help="a short walkthrough of what the sandbox allows and blocks",
        description="Run a few real commands in the sandbox (write in the workspace, reach the "
        "host's network, read a planted SSH key, write outside, see a secret variable, plant a "
        "git hook) and show what happened. Uses a temporary home and workspace only.",
    )
    p.add_argument("--config", metavar="FILE", help="config file to use")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ...config import load_config
    from .demo_steps import render, run_demo

    config = load_config(args.config)
    print(f"agentvisor demo: backend {config.sandbox.backend}, network {config.sandbox.network}\n")
    steps = run_demo(
        config,
        lambda step: print(render(step), flush=True),
        warn=lambda text: print(f"agentvisor: warning: {text}", flush=True),
    )
    holes = [s for s in steps if not s.as_expected]
    print()
    if holes:
        print(f"{len(holes)} step(s) did not behave as a secure sandbox must")
        return 1
    print("every step behaved as expected: the agent works in its workspace and nothing else")
    return 0
