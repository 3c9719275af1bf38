"""``agentvisor run [--profile NAME] -- HARNESS ARGS...``: an agent harness, sandboxed.

The harness (Codex CLI, Claude Code, Hermes Agent, or any program) runs in the sandbox
with the egress proxy as its only way out, its own state directories from a place
agentvisor manages, and placeholders instead of its API keys: the proxy terminates TLS
toward each secret's hosts and puts the value in there only (docs/harness.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...config import Config


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run an agent harness (codex, claude, hermes, ...) sandboxed, keys injected by "
        "the proxy",
        description="Run HARNESS in the sandbox with network: proxy. It gets placeholders "
        "({{secret:NAME}}) instead of its API keys; the egress proxy fills them in only "
        "toward each secret's hosts, over TLS it terminates with a per-run CA. The "
        "harness's state directories come from ~/.local/share/agentvisor/harness/PROFILE.",
    )
    p.add_argument(
        "--profile",
        metavar="NAME",
        help="harness profile: codex, claude, hermes, generic, or a .yaml file (default: "
        "chosen by the program's name, else generic)",
    )
    p.add_argument("--config", metavar="FILE", help="config file (default: the usual lookup)")
    p.add_argument("--workspace", metavar="DIR", help="the workspace (default: this directory)")
    p.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- HARNESS ARGS")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    import os

    from ...config import load_config
    from ...errors import ConfigError
    from ...net.access import NetworkAccess
    from ...net.harness import HarnessPolicy, harness_attachment, load_profile
    from ...net.proxy import EgressProxy
    from ...net.secrets import SecretStore
    from ...sandbox import Sandbox

    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise ConfigError("run needs a program: agentvisor run [--profile NAME] -- HARNESS ...")
    config = load_config(args.config)
    profile = load_profile(args.profile, argv[0])
    workspace = os.path.abspath(args.workspace or os.getcwd())
    run_id = f"run-{os.getpid()}"
    audit = _audit(config, run_id)
    access = NetworkAccess.from_config(config, on_event=audit)
    access.policy = HarnessPolicy(access.policy, profile)
    secrets = SecretStore.from_config(config)
    sandbox_cfg = config.sandbox.model_copy(update={"network": "proxy"})
    sandbox = Sandbox(sandbox_cfg, workspace=workspace)
    for warning in sandbox.warnings:
        print(f"agentvisor: warning: {warning}", file=sys.stderr)
    proxy = EgressProxy(
        access,
        port=config.network.proxy_port,
        timeout=config.network.timeout,
        session=run_id,
        secrets=secrets,
        ca_file=config.network.ca_file,
    )
    with proxy:
        attachment, warnings = harness_attachment(profile, proxy.attachment(), secrets)
        for warning in warnings:
            print(f"agentvisor: warning: {warning}", file=sys.stderr)
        result = sandbox.run(argv, capture=False, attachment=attachment)
    if result.timed_out:
        print("agentvisor: the harness timed out (sandbox.timeout)", file=sys.stderr)
    return result.exit_code


def _audit(config: Config, run_id: str) -> Callable[[dict[str, Any]], None]:
    """Every request of the harness as a ``network`` event of the audit log (session
    ``run-PID``): each admission with its decision, and for requests on intercepted
    connections the status and body size; never a secret's value."""
    from ...state import State
    from ...state.events import AuditEvent

    store = State.from_config(config).audit

    def record(event: dict[str, Any]) -> None:
        destination = f"{event.get('method')} {event.get('destination')}"
        if event.get("kind") == "response":
            result = f"{destination} -> {event.get('status')}, {event.get('bytes')} bytes"
            store.record(AuditEvent(kind="network", session=run_id, tool="proxy", result=result))
            return
        store.record(
            AuditEvent(
                kind="network",
                session=run_id,
                tool="proxy",
                decision=event.get("decision"),
                rule=event.get("rule"),
                reason=event.get("reason"),
                result=destination[:500],
            )
        )

    return record
