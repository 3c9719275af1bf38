"""`agentvisor exec` (being written)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("exec", help="exec")
    p.set_defaults(handler=lambda args: 0)
