"""``agentvisor mcp``: serve one agent session over MCP on stdin/stdout."""

from __future__ import annotations

import argparse


def add_gateway_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE", help="config file")
    p.add_argument(
        "--workspace",
        metavar="DIR",
        help="the agent's workspace (default: sandbox.workspace, else the current directory)",
    )
    p.add_argument(
        "--toolsets",
        metavar="A,B",
        help="toolsets for the session(s), e.g. "
        "'file,terminal' or 'safe' (default: toolsets in the config)",
    )


def toolsets_from(args: argparse.Namespace) -> list[str] | None:
    from ...config import TOOLSET_NAMES
    from ...errors import ConfigError

    if not args.toolsets:
        return None
    names = [n.strip() for n in args.toolsets.split(",") if n.strip()]
    unknown = [n for n in names if n not in TOOLSET_NAMES]
    if unknown or not names:
        raise ConfigError(
            f"--toolsets: unknown toolset(s) {', '.join(unknown) or '(none)'} "
            f"(accepted: {', '.join(TOOLSET_NAMES)})"
        )
    return names


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve one agent session over MCP on stdio",
        description="Serve one session over MCP on stdin/stdout, for agents that start their "
        "MCP servers as commands (Claude Code, Codex, Hermes Agent). The session gets its own "
        "sandbox, which ends when the agent disconnects.",
    )
    add_gateway_options(p)
    p.add_argument(
        "--agent",
        metavar="NAME",
        help="the agent's name in logs and approvals (default: the name the MCP client sends)",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ...config import load_config
    from ...gateway import Gateway
    from ...sandbox.runner import adopt_orphans
    from ...upstreams import Upstreams, configured
    from ...wasm.gateway import tool_specs
    from ..mcpserver import serve_stdio

    adopt_orphans()
    toolsets = toolsets_from(args)
    config = load_config(args.config)
    gateway = Gateway(config, workspace=args.workspace, extra_tools=tool_specs)
    upstreams = Upstreams.attach(gateway, configured(config))
    try:
        serve_stdio(gateway, agent=args.agent, toolsets=toolsets)
    finally:
        upstreams.close()
    return 0
