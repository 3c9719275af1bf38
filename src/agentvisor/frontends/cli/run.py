"""``agentvisor run [--profile NAME] -- HARNESS ARGS...``: an agent harness, sandboxed.

The harness (Codex CLI, Claude Code, Hermes Agent, or any program) runs in the sandbox
with the egress proxy as its only way out, its own state directories from a place
agentvisor manages, and placeholders instead of its API keys: the proxy terminates TLS
toward each secret's hosts and puts the value in there only (docs/harness.md). It sees
the workspace through a changeset, as a gateway session does: in ``workspace.mode: auto``
its ordinary edits are applied every few seconds and at exit, and what the user's own
tools would execute waits for a person (docs/changesets.md).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...changes import Changesets, Settlement
    from ...changes.settling import Settler, WriteDecider
    from ...sandbox import Attachment, Result, Sandbox
    from ...state.events import AuditEvent, AuditLog

# Seconds between settles while the harness runs: its ordinary edits reach the workspace
# this soon, for one scan of its changeset (which grows with its changes, not with the
# workspace) each time.
SETTLE_EVERY = 2.0


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
    import secrets as tokens

    from ...actions import Context
    from ...changes.settling import for_sandbox, write_policy
    from ...config import load_config
    from ...errors import ConfigError
    from ...exec.terminal import TerminalGuard, as_own_stdio
    from ...net.access import NetworkAccess
    from ...net.harness import HarnessPolicy, harness_attachment, load_profile
    from ...net.proxy import EgressProxy
    from ...net.secrets import SecretStore
    from ...sandbox import Sandbox
    from ...state import State

    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if not argv:
        raise ConfigError("run needs a program: agentvisor run [--profile NAME] -- HARNESS ...")
    config = load_config(args.config)
    profile = load_profile(args.profile, argv[0])
    workspace = os.path.abspath(args.workspace or os.getcwd())
    run_id = f"run-{tokens.token_hex(6)}"
    audit = State.from_config(config).audit
    access = NetworkAccess.from_config(config, on_event=_network_events(audit, run_id))
    # The operator's own policy judges the harness's writes; the profile widens only fetch.
    write_decider = write_policy(
        access.policy,
        Context(session=run_id, agent=profile.name, workspace=workspace, tool="workspace"),
    )
    access.policy = HarnessPolicy(access.policy, profile)
    secrets = SecretStore.from_config(config)
    sandbox_cfg = config.sandbox.model_copy(update={"network": "proxy"})
    backend = sandbox_cfg.backend
    # sandbox.disk_mb bounds the workspace only through a changeset's size-limited layers.
    overlaid = config.workspace.mode != "direct" and backend == "bwrap"
    sandbox = Sandbox(
        config.model_copy(update={"sandbox": sandbox_cfg}),
        workspace=workspace,
        workspace_quota=overlaid,
    )
    changesets = for_sandbox(
        config,
        sandbox.workspace,
        unavailable=None if backend == "bwrap" else f"the bwrap sandbox (the backend is {backend})",
        warnings=sandbox.warnings,
        quota_bytes=sandbox.changeset_quota_bytes(),
    )
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
    # The harness draws on a pseudo-terminal of its own (a TUI, unfiltered), never the
    # caller's terminal; its modes and size come back afterwards, whatever it left them as.
    guard = TerminalGuard((0, 1, 2), filter_output=False, caller=os.getpid())
    with proxy, guard as child, as_own_stdio(child):
        attachment, warnings = harness_attachment(profile, proxy.attachment(), secrets)
        for warning in warnings:
            print(f"agentvisor: warning: {warning}", file=sys.stderr)
        if changesets is None:
            result = sandbox.run(argv, capture=False, attachment=attachment)
        else:
            result = _run_over_changeset(
                sandbox,
                argv,
                attachment,
                changesets,
                run_id=run_id,
                decide=write_decider,
                record=audit.record_many,
            )
    if result.timed_out:
        print("agentvisor: the harness timed out (sandbox.timeout)", file=sys.stderr)
    return result.exit_code


def _run_over_changeset(
    sandbox: Sandbox,
    argv: list[str],
    attachment: Attachment,
    changesets: Changesets,
    *,
    run_id: str,
    decide: WriteDecider,
    record: Callable[[list[AuditEvent]], None],
) -> Result:
    """The harness in a sandbox that sees the workspace through one changeset (the run is
    its session): ordinary edits are applied while it runs, the host-run class waits for
    a person (docs/changesets.md)."""
    import os

    from ...changes.settling import Settler
    from ...records import replace
    from ...sandbox.view import OverlayChannel

    session = changesets.start(run_id)
    live = session.hold_live()  # `agentvisor changes` sees the run as running
    channel = OverlayChannel(str(session.upper), str(session.work))
    settler = Settler(changesets, session, decide, record, every=SETTLE_EVERY).start()
    try:
        overlaid = replace(attachment, overlay=channel.overlay)
        return sandbox.run(argv, capture=False, attachment=overlaid)
    finally:
        last = settler.stop()
        channel.close()
        changesets.finish(session)
        os.close(live)
        print(f"agentvisor: {_outcome(run_id, settler, last)}", file=sys.stderr)


def _outcome(run_id: str, settler: Settler, last: Settlement | None) -> str:
    """One line: what the run applied to the workspace, what waits, how to review."""
    from ...changes import topmost

    parts = []
    if settler.applied:
        ids = settler.changesets_applied
        which = f"changeset {ids[0]}" if len(ids) == 1 else f"changesets {ids[0]}-{ids[-1]}"
        parts.append(
            f"applied {len(set(settler.applied))} path(s) to the workspace ({which}; each "
            "agentvisor undo reverts the newest)"
        )
    held = topmost(last.held) if last is not None else []
    if held:
        shown = ", ".join(p.path for p in held[:3]) + (", ..." if len(held) > 3 else "")
        parts.append(
            f"{len(held)} held for a person ({shown}; review: agentvisor changes, "
            f"agentvisor apply --session {run_id})"
        )
    parts += [f"{error} (agentvisor changes)" for error in dict.fromkeys(settler.errors)]
    return "; ".join(parts) if parts else "the harness changed nothing in the workspace"


def _network_events(store: AuditLog, run_id: str) -> Callable[[dict[str, Any]], None]:
    """Every request of the harness as a ``network`` event of the audit log (session
    ``run-ID``): each admission with its decision, and for requests on intercepted
    connections the status and body size; never a secret's value."""
    from ...state.events import AuditEvent

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
