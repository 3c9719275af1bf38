"""``agentvisor upstreams``: the third-party MCP servers behind the gateway and their pins.

    agentvisor upstreams                 each server, each tool's pinned SHA-256, held tools
    agentvisor upstreams show S TOOL     the changed text of a held tool, to review it
    agentvisor upstreams pin S [TOOL]    accept that text (every held tool of S without TOOL)

Pins are kept in the state directory (``upstream-pins.json``); a gateway pins a server's
tools the first time it connects and holds a tool whose description or schema changed.
These commands are for the operator on the host: no tool an agent can call re-pins.
"""

from __future__ import annotations

import argparse
import json
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "upstreams",
        help="list upstream MCP servers and their pinned tools; review and re-pin",
        description="List the upstream MCP servers of the config with each tool's pinned "
        "SHA-256. A tool whose description or schema changed since it was pinned is held "
        "(refused) until you review it (`show`) and accept it (`pin`).",
    )
    p.add_argument("--config", metavar="FILE", help="config file")
    p.add_argument("--json", action="store_true", help="print the pins as JSON")
    p.set_defaults(handler=run_list)
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    show = actions.add_parser("show", help="print a held tool's new description and schema")
    show.add_argument("server")
    show.add_argument("tool")
    show.set_defaults(handler=run_show)
    pin = actions.add_parser("pin", help="accept the held text of a tool (or of every one)")
    pin.add_argument("server")
    pin.add_argument("tool", nargs="?")
    pin.set_defaults(handler=run_pin)


def run_list(args: argparse.Namespace) -> int:
    from ...config import load_config
    from ...upstreams import PinStore, configured

    servers = configured(load_config(args.config))
    pins = PinStore.default().load()
    if args.json:
        print(json.dumps(pins, indent=1, sort_keys=True))
        return 0
    names = [s.name for s in servers] + sorted(set(pins) - {s.name for s in servers})
    if not names:
        print("no upstream servers (add them under `upstreams:` in the config)")
        return 0
    kinds = {
        s.name: f"stdio {' '.join(s.command)}" if s.command else f"HTTP {s.url}" for s in servers
    }
    for name in names:
        print(f"{name}: {kinds.get(name, 'not in the config any more')}")
        tools = pins.get(name, {})
        if not tools:
            print("  (no tools pinned yet: they are pinned when a gateway first connects)")
        for tool, entry in sorted(tools.items()):
            line = f"  {name}__{tool}  sha256:{entry.get('sha256')}"
            held = entry.get("held")
            if held:
                line += f"  HELD: changed to sha256:{held.get('sha256')} on {held.get('seen_at')}"
            print(line)
    return 0


def run_show(args: argparse.Namespace) -> int:
    from ...upstreams import PinStore

    entry = PinStore.default().load().get(args.server, {}).get(args.tool)
    if entry is None or "held" not in entry:
        print(f"{args.server}__{args.tool} is not held", file=sys.stderr)
        return 1
    held = entry["held"]
    print(f"{args.server}__{args.tool}: pinned sha256:{entry['sha256']}")
    print(f"changed to sha256:{held['sha256']} (seen {held['seen_at']}):\n")
    print("description:")
    print(held["description"])
    print("\ninput schema:")
    print(json.dumps(held["input_schema"], indent=2, sort_keys=True))
    return 0


def run_pin(args: argparse.Namespace) -> int:
    from ...upstreams import PinStore

    approved = PinStore.default().approve(args.server, args.tool)
    if not approved:
        print(f"{args.server}: no held tools")
        return 0
    for tool in approved:
        print(f"pinned the new text of {args.server}__{tool}")
    return 0
