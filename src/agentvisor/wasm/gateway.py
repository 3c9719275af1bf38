"""The installed Wasm tools as gateway tools (toolset ``wasm``, names ``wasm_TOOL_FUNC``).

Each function becomes a `ToolSpec` whose one action is ``Action("tool", NAME,
arguments=...)``, so the gateway's pipeline applies to it like to any tool from outside
the project: the policy decides (``policy.defaults.tool``, rules with ``kind: tool``),
an ``ask`` goes to a person, the call is audited, the result shaped and redacted. The
tool's own network requests go through the gateway's policy engine, approval broker and
audit log as well, each behind the tool's granted hosts and secrets. Its flow labels
follow from its capabilities (`manifest.flow_labels`).
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from ..actions import Action
from ..errors import AgentvisorError
from .store import ToolStore
from .tools import PREFIX, TOOLSET, WasmTools

if TYPE_CHECKING:
    from ..gateway import Gateway
    from ..gateway.session import Session
    from ..gateway.tools import ToolSpec

log = logging.getLogger("agentvisor.wasm")


def tool_specs(gateway: Gateway, store: ToolStore | None = None) -> list[ToolSpec]:
    """Every installed, intact tool's functions; none (and a warning) if the lock is bad."""
    store = store or ToolStore()
    if not store.lock_path.exists():
        return []  # no tool installed: do not even load wasmtime
    from ..net.access import NetworkAccess
    from ..net.guard import Guard

    network = NetworkAccess(
        gateway.policy,
        Guard(extra_blocked=gateway.config.network.block),
        resolve_ask=gateway.resolve_ask,
        on_event=gateway.network_event,
    )
    try:
        tools = WasmTools.load(gateway.config, store=store, network=network)
    except AgentvisorError as exc:
        log.warning("no Wasm tools offered: %s", exc)
        gateway.unavailable[PREFIX] = str(exc)
        return []
    for name, why in tools.refused.items():
        log.warning("Wasm tool %s is not offered: %s", name, why)
        gateway.unavailable[f"{PREFIX}{name}_"] = why
    return [_spec(tools, entry) for entry in tools.list()]


def _spec(tools: WasmTools, entry: dict[str, Any]) -> ToolSpec:
    from ..gateway.tools import ToolSpec

    name = entry["name"]

    def actions(session: Session, arguments: dict[str, Any]) -> list[Action]:
        return [Action("tool", name, arguments=arguments)]

    def run(session: Session, arguments: dict[str, Any]) -> Any:
        from ..gateway.results import ToolOutput

        try:
            result = tools.call(entry["tool"], entry["function"], arguments, session.context(name))
        except AgentvisorError as exc:
            return ToolOutput(str(exc), is_error=True)
        return ToolOutput(json.dumps(result, ensure_ascii=False, indent=1), data=result)

    return ToolSpec(
        name=name,
        description=entry["description"],
        input_schema=entry["input_schema"],
        toolsets=frozenset({TOOLSET}),
        actions=actions,
        run=run,
        labels=frozenset(entry["labels"]),
    )
