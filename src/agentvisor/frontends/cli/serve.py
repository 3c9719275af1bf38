"""``agentvisor serve``: the gateway over streamable HTTP (MCP at /mcp)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from .mcp import add_gateway_options, toolsets_from

if TYPE_CHECKING:
    from ...gateway import Gateway
    from ..dashboard import Dashboard


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run the gateway: MCP over HTTP at /mcp",
        description="Serve MCP over streamable HTTP at http://HOST:PORT/mcp, and the dashboard "
        "for approvals and changes at http://HOST:PORT/dashboard/ (docs/dashboard.md). Each MCP "
        "session gets its own sandbox. Binding anything but loopback requires a bearer token.",
    )
    add_gateway_options(p)
    p.add_argument("--host", help="address to listen on (default: gateway.host, 127.0.0.1)")
    p.add_argument("--port", type=_port, help="port, 0-65535 (default: gateway.port, 8765)")
    p.add_argument(
        "--token",
        help="bearer token clients must send (default: gateway.token; "
        "or the AGENTVISOR_TOKEN environment variable)",
    )
    p.set_defaults(handler=run)


def _port(text: str) -> int:
    """A TCP port for argparse: a clear usage error instead of the server's traceback."""
    port = int(text)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text} is not a port (0-65535)")
    return port


def run(args: argparse.Namespace) -> int:
    import os

    from ...config import load_config
    from ...gateway import Gateway, heap
    from ...sandbox.runner import adopt_orphans
    from ...upstreams import Upstreams, configured
    from ...wasm.gateway import tool_specs
    from ..mcpserver import http_app, serve_http

    heap.bound_arenas()  # before any thread: a call's thread gets an arena of its own
    adopt_orphans()
    config = load_config(args.config)
    host = args.host or config.gateway.host
    port = args.port or config.gateway.port
    token = args.token or os.environ.get("AGENTVISOR_TOKEN") or config.gateway.token
    toolsets = toolsets_from(args)
    gateway = Gateway(config, workspace=args.workspace, extra_tools=tool_specs)
    upstreams = Upstreams.attach(gateway, configured(config))
    app = http_app(gateway, host=host, token=token, toolsets=toolsets)
    base = f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
    if config.dashboard.enabled:  # the waiting agent is told where a person answers
        gateway.queue_channel.where = f"the dashboard {base}/dashboard/"
    from ...exec.server import ExecServer

    # `agentvisor exec` on this machine hands its commands to this gateway (fast start).
    exec_server = ExecServer(asks=gateway).start()
    print(
        banner(gateway, app.dashboard, base, toolsets or config.toolsets, exec_server.path),
        file=sys.stderr,
        flush=True,
    )
    try:
        serve_http(gateway, app, host=host, port=port)
    finally:
        exec_server.stop()
        upstreams.close()
    return 0


def banner(
    gateway: Gateway, dashboard: Dashboard | None, base: str, toolsets: list[str], exec_path: str
) -> str:
    """What a person needs first: the workspace, where agents connect, where to approve."""
    writes = (
        "the agent's writes land directly"
        if gateway.changesets is None
        else f"workspace.mode {gateway.config.workspace.mode}: see agentvisor changes, diff, undo"
    )
    if dashboard is None or not dashboard.enabled:
        web = "off (dashboard.enabled: false)"
    else:
        web = f"{base}/dashboard/ ({dashboard.access.login_method})"
    return (
        "agentvisor gateway (Ctrl-C stops it)\n"
        f"  workspace  {gateway.workspace} ({writes})\n"
        f"  MCP        {base}/mcp (toolsets {','.join(toolsets)})\n"
        f"  dashboard  {web}\n"
        f"  exec       agentvisor exec runs its commands through this gateway ({exec_path})"
    )
