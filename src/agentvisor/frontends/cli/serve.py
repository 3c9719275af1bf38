"""``agentvisor serve``: the gateway over streamable HTTP (MCP at /mcp)."""

from __future__ import annotations

import argparse
import sys

from .mcp import add_gateway_options, toolsets_from


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="run the gateway: MCP over HTTP at /mcp",
        description="Serve MCP over streamable HTTP at http://HOST:PORT/mcp. Each MCP session "
        "gets its own sandbox. Binding anything but loopback requires a bearer token.",
    )
    add_gateway_options(p)
    p.add_argument("--host", help="address to listen on (default: gateway.host, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default: gateway.port, 8765)")
    p.add_argument(
        "--token",
        help="bearer token clients must send (default: gateway.token; "
        "or the AGENTVISOR_TOKEN environment variable)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import os

    from ...config import load_config
    from ...gateway import Gateway
    from ...sandbox.runner import adopt_orphans
    from ...upstreams import Upstreams, configured
    from ...wasm.gateway import tool_specs
    from ..mcpserver import http_app, serve_http

    adopt_orphans()
    config = load_config(args.config)
    host = args.host or config.gateway.host
    port = args.port or config.gateway.port
    token = args.token or os.environ.get("AGENTVISOR_TOKEN") or config.gateway.token
    toolsets = toolsets_from(args)
    gateway = Gateway(config, workspace=args.workspace, extra_tools=tool_specs)
    upstreams = Upstreams.attach(gateway, configured(config))
    app = http_app(gateway, host=host, token=token, toolsets=toolsets)
    if config.dashboard.enabled:  # the waiting agent is told where a person answers
        gateway.queue_channel.where = f"the dashboard http://{host}:{port}/dashboard/"
    from ...exec.server import ExecServer

    # `agentvisor exec` on this machine hands its commands to this gateway (fast start).
    exec_server = ExecServer(broker=gateway.broker).start()
    print(
        f"agentvisor gateway: MCP at http://{host}:{port}/mcp, workspace "
        f"{gateway.workspace}, toolsets {','.join(toolsets or config.toolsets)}; "
        f"agentvisor exec is served at {exec_server.path}",
        file=sys.stderr,
        flush=True,
    )
    try:
        serve_http(gateway, app, host=host, port=port)
    finally:
        exec_server.stop()
        upstreams.close()
    return 0
