"""Third-party MCP servers behind the gateway (``upstreams:`` in the config).

    gateway = Gateway(config)
    upstreams = Upstreams.attach(gateway, servers)   # connects, pins, adds the tools
    ...
    gateway.close(); upstreams.close()

Each server's tools are offered as ``SERVER__TOOL`` in the toolset ``upstreams`` and
pass the gateway's one pipeline like every built-in tool: the policy judges a ``tool``
action carrying the server, the tool and the arguments; an ask goes to a person; the
result is redacted and capped; the call is audited; the flow guard sees its labels.

A stdio server runs inside agentvisor's sandbox (its own, with the server's ``mounts``),
whose only way out is the egress proxy, so each destination it dials is judged by the
policy. An HTTP server is reached by a client whose every request the destination guard
and the policy admit first, connected to exactly the addresses they checked. Tool
descriptions and schemas are pinned at first sight (`pins.PinStore`); a tool whose text
changed is held until the operator re-pins it.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..actions import Action
from ..errors import AgentvisorError
from ..gateway.results import ToolOutput
from ..gateway.tools import ToolSpec
from ..records import replace
from .client import UpstreamClient, UpstreamError
from .labels import default_labels
from .pins import PinCheck, PinStore, ToolText

if TYPE_CHECKING:
    from ..config import Config, UpstreamConfig
    from ..gateway import Gateway, Session

__all__ = ["PinStore", "UpstreamError", "Upstreams", "configured", "tool_name"]

SEPARATOR = "__"
TOOLSET = "upstreams"


def configured(config: Config) -> list[UpstreamConfig]:
    """The ``upstreams:`` of a loaded config (none in the built-in defaults)."""
    return list(config.upstreams)


def tool_name(server: str, tool: str) -> str:
    return f"{server}{SEPARATOR}{tool}"


class Upstreams:
    """The connected upstream servers of one gateway."""

    def __init__(self, gateway: Gateway, pins: PinStore | None = None) -> None:
        self.gateway = gateway
        self.pins = pins or PinStore.default()
        self.clients: dict[str, UpstreamClient] = {}
        self._proxies: list[Any] = []

    @classmethod
    def attach(
        cls,
        gateway: Gateway,
        servers: Sequence[UpstreamConfig],
        *,
        pins: PinStore | None = None,
    ) -> Upstreams:
        """Connect every server and add its tools to the gateway (before sessions open).

        A server that cannot start is reported on stderr and in the audit log, and offers
        no tools: the rest of the gateway works without it.
        """
        upstreams = cls(gateway, pins)
        for server in servers:
            try:
                gateway.tools.extend(upstreams.connect(server))
            except AgentvisorError as exc:
                upstreams.report(f"{exc}; its tools are not offered")
        return upstreams

    def connect(self, server: UpstreamConfig) -> list[ToolSpec]:
        client = self._client(server).start()
        self.clients[server.name] = client
        try:
            texts = client.list_tools()
        except AgentvisorError:
            client.close()
            del self.clients[server.name]
            raise
        specs, pinned = [], []
        for text in texts:
            check = self.pins.check(server.name, text)
            if check.status == "pinned":
                pinned.append(text.name)
            elif check.status == "held":
                self.report(_held_reason(server.name, text.name, check))
            specs.append(self._spec(server, text, check))
        if pinned:
            self.report(f"upstream {server.name}: pinned at first use: {', '.join(pinned)}")
        return specs

    def _client(self, server: UpstreamConfig) -> UpstreamClient:
        if server.command:
            return UpstreamClient(
                server, sandbox=self._sandbox(server), attachment=self._attachment(server)
            )
        return UpstreamClient(server, http_client=lambda: self._http_client(server))

    def _sandbox(self, server: UpstreamConfig) -> Any:
        from ..sandbox import Sandbox

        config = self.gateway.config
        own = config.sandbox.model_copy(update={"mounts": [*config.sandbox.mounts, *server.mounts]})
        return Sandbox(config.model_copy(update={"sandbox": own}), workspace=self.gateway.workspace)

    def _access(self) -> Any:
        from ..net.access import NetworkAccess
        from ..net.guard import Guard

        gw = self.gateway
        return NetworkAccess(
            gw.policy,
            Guard(extra_blocked=gw.config.network.block),
            resolve_ask=gw.resolve_ask,
            on_event=gw.network_event,
        )

    def _attachment(self, server: UpstreamConfig) -> Any:
        """The egress proxy, always: a server's only way out, judged per destination."""
        from ..net.proxy import EgressProxy

        proxy = EgressProxy.from_config(
            self.gateway.config, session=f"upstream:{server.name}", access=self._access()
        ).start()
        self._proxies.append(proxy)
        attachment = proxy.attachment()
        return replace(attachment, env={**attachment.env, **server.env})

    def _http_client(self, server: UpstreamConfig) -> Any:
        """Every request admitted by the guard and the policy, and sent to exactly the
        addresses they checked (DNS pinning, as for the web tools)."""
        from ..net.client import guarded_async_client, verifying_context

        where = f"upstream:{server.name}"
        return guarded_async_client(
            self._access(),
            tool=where,
            session=where,
            verify=verifying_context(self.gateway.config.network.ca_file),
            timeout=server.timeout,
        )

    # -- tools --------------------------------------------------------------------------

    def _spec(self, server: UpstreamConfig, text: ToolText, check: PinCheck) -> ToolSpec:
        name = tool_name(server.name, text.name)
        labels = tuple(server.labels.get(text.name) or default_labels(text.name))

        def actions(session: Session, arguments: dict[str, Any]) -> list[Action]:
            return [Action("tool", name, arguments=arguments)]

        def run(session: Session, arguments: dict[str, Any]) -> ToolOutput:
            return self.call(server, text, arguments)

        if check.status == "held":
            return ToolSpec(
                name=name,
                description=f"[held by agentvisor: {server.name}'s tool {text.name} changed "
                "since it was pinned; an operator must review it]",
                input_schema={"type": "object"},
                toolsets=frozenset({TOOLSET}),
                actions=actions,
                run=lambda session, arguments: ToolOutput(
                    _held_reason(server.name, text.name, check), is_error=True
                ),
                labels=frozenset(labels),
            )
        return ToolSpec(
            name=name,
            description=f"[{server.name}] {text.description}",
            input_schema=_usable_schema(text.input_schema),
            toolsets=frozenset({TOOLSET}),
            actions=actions,
            run=run,
            labels=frozenset(labels),
        )

    def call(self, server: UpstreamConfig, text: ToolText, arguments: dict[str, Any]) -> ToolOutput:
        client = self.clients[server.name]
        # The server may have changed the tool since it was listed (a rug pull within one
        # run): the text is compared again before every call, which costs one round trip.
        current = next((t for t in client.list_tools() if t.name == text.name), None)
        if current is None:
            return ToolOutput(f"upstream {server.name} no longer offers {text.name}", is_error=True)
        if current.digest != text.digest:
            check = self.pins.check(server.name, current)
            if check.status != "match":
                return ToolOutput(_held_reason(server.name, text.name, check), is_error=True)
        answer, is_error = client.call_tool(text.name, arguments)
        return ToolOutput(answer, is_error=is_error)

    # -- lifecycle ----------------------------------------------------------------------

    def report(self, message: str) -> None:
        from ..state.events import AuditEvent

        print(f"agentvisor: {message}", file=sys.stderr, flush=True)
        self.gateway.audit.record(AuditEvent(kind="sandbox", result=message[:500]))

    def close(self) -> None:
        for client in self.clients.values():
            client.close()
        self.clients.clear()
        for proxy in self._proxies:
            proxy.stop()
        self._proxies.clear()


def _held_reason(server: str, tool: str, check: PinCheck) -> str:
    return (
        f"{tool_name(server, tool)} is held: its description or schema changed since it was "
        f"pinned (pinned sha256:{check.pinned[:16]}, now sha256:{check.seen[:16]}). A tool "
        "that changes what it says it does is refused until an operator reviews the new "
        f"text and runs `agentvisor upstreams pin {server} {tool}`"
    )


def _usable_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The server's schema when it is a valid JSON Schema, else one that accepts any object
    (the gateway validates arguments with it; the server checks them again anyway)."""
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError:
        return {"type": "object"}
    return schema
