"""The MCP front end: the official MCP SDK over stdio or streamable HTTP, in front of `Gateway`.

Nothing is decided here. A request is mapped to its gateway `Session` and handed to
`Gateway.call_async`: its blocking steps run in worker threads, and an ask waits in the
event loop without holding one, sending MCP progress notifications meanwhile. A cancelled
request or a disconnected client cancels the call, which withdraws its ask.

Sessions: over stdio the process is one session. Over HTTP, a client on the handshake
protocol (<= 2025-11-25) gets one session per ``Mcp-Session-Id``; the per-request
protocol (2026-07-28) has no connection, so a client names its session with
``?session=NAME`` in the URL or an ``X-Agentvisor-Session`` header (else it shares the
session ``default``).
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server

from .. import version
from ..errors import AgentvisorError, ConfigError, QuotaExceeded
from ..gateway import Gateway, Session
from ..net.loopback import is_loopback

SESSION_HEADER = "x-agentvisor-session"
log = logging.getLogger("agentvisor.mcp")


def build_server(gateway: Gateway, session_for: Callable[[Any], Session]) -> Server:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        session = session_for(ctx)
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=spec.name, description=spec.description, input_schema=spec.input_schema
                )
                for spec in session.tools.values()
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        async def progress(done: float, total: float, message: str) -> None:
            await ctx.session.report_progress(done, total, message)

        try:
            session = session_for(ctx)
            output = await gateway.call_async(
                session, params.name, params.arguments or {}, progress
            )
            text, is_error = output.text, output.is_error
        except AgentvisorError as exc:  # e.g. a quota: no session could be opened
            text, is_error = f"{params.name}: refused: {exc}", True
            rule = "gateway:quota" if isinstance(exc, QuotaExceeded) else "gateway:refused"
            with contextlib.suppress(Exception):  # recorded if the log can take it
                await anyio.to_thread.run_sync(
                    gateway.refused_call, params.name, params.arguments or {}, str(exc), rule
                )
        except Exception:  # the gateway answers every call; this is the last resort
            log.exception("tool call %s failed in the MCP front end", params.name)
            text, is_error = (
                f"{params.name}: agentvisor could not handle this call (an internal error; "
                "the gateway's log has the details). Nothing more is known to have run.",
                True,
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], is_error=is_error
        )

    return Server(
        "agentvisor",
        version=version(),
        instructions="Tools run in agentvisor's sandbox (no network, no secrets) "
        "or on its guarded host network. Refusals say why and how a person can "
        "allow the action; do not try to work around them.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


# -- stdio ------------------------------------------------------------------------------


def serve_stdio(gateway: Gateway, *, agent: str | None, toolsets: Sequence[str] | None) -> None:
    from mcp.server.stdio import stdio_server

    session = gateway.open_session(agent=agent, toolsets=toolsets, client="stdio")

    def session_for(ctx: Any) -> Session:
        if session.agent is None:
            session.agent = _client_name(ctx)
        return session

    server = build_server(gateway, session_for)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    try:
        anyio.run(main)
    finally:
        gateway.close()


# -- streamable HTTP --------------------------------------------------------------------


class HttpSessions:
    """Maps HTTP requests to gateway sessions and ends them with the MCP session.

    The gateway owns the sessions: this map only finds them (weak values), so a session
    the gateway closed (idle past sandbox.idle_timeout, or ended from the dashboard) is
    not kept alive here. The SDK forgets an MCP session idle as long (`http_app`).
    """

    def __init__(self, gateway: Gateway, toolsets: Sequence[str] | None) -> None:
        self.gateway = gateway
        self.toolsets = toolsets
        self.by_key: weakref.WeakValueDictionary[str, Session] = weakref.WeakValueDictionary()

    def session_for(self, ctx: Any) -> Session:
        request = ctx.request
        key = _session_key(request)
        session = self.by_key.get(key)
        if session is None or session.closed:
            agent = (
                request.query_params.get("agent") if request is not None else None
            ) or _client_name(ctx)
            session = self.gateway.open_session(
                agent=agent, toolsets=self.toolsets, client=_client_id(request)
            )
            self.by_key[key] = session
        return session

    def end(self, key: str) -> None:
        session = self.by_key.pop(key, None)
        if session is not None:
            self.gateway.close_session(session)


def _client_id(request: Any) -> str:
    """Who is calling, for the per-client caps and quotas: the peer address. Not a header
    the caller chooses (a new one per request would escape every quota); the one bearer
    token names no particular client."""
    if request is None or request.client is None:
        return "http"
    return f"addr:{request.client.host}"


def _session_key(request: Any) -> str:
    if request is None:
        return "default"
    legacy = request.headers.get("mcp-session-id")
    if legacy:
        return "mcp:" + legacy
    named = request.headers.get(SESSION_HEADER) or request.query_params.get("session")
    return "named:" + named if named else "default"


def _client_name(ctx: Any) -> str | None:
    params = getattr(ctx.session, "client_params", None)
    return params.client_info.name if params is not None and params.client_info else None


def http_app(
    gateway: Gateway, *, host: str, token: str | None, toolsets: Sequence[str] | None
) -> Any:
    if not is_loopback(host) and not token:
        raise ConfigError(
            f"gateway.host is {host}, which is not loopback: set gateway.token "
            "(or --token) so only clients with the bearer token can connect"
        )
    sessions = HttpSessions(gateway, toolsets)
    server = build_server(gateway, sessions.session_for)
    dashboard = _dashboard(gateway, host)
    routes = dashboard.routes() if dashboard else []
    # The SDK forgets an MCP session with no request for as long as the gateway keeps an
    # idle session (its own default is 30 minutes whatever sandbox.idle_timeout says).
    app = server.streamable_http_app(
        host=host,
        custom_starlette_routes=routes,
        session_idle_timeout=gateway.config.sandbox.idle_timeout,
    )
    return _Guarded(app, token=token, sessions=sessions, dashboard=dashboard)


def _dashboard(gateway: Gateway, host: str) -> Any:
    """The dashboard and webhook routes (docs/dashboard.md), started; None when both are off."""
    config = gateway.config
    if not (config.dashboard.enabled or config.webhooks.targets):
        return None
    import sys

    from .dashboard import Dashboard

    dashboard = Dashboard(gateway, host=host)
    if config.dashboard.enabled and not is_loopback(host) and dashboard.locked_reason:
        print(f"agentvisor: the dashboard is locked: {dashboard.locked_reason}", file=sys.stderr)
    return dashboard.start()


class _Guarded:
    """ASGI wrapper: bearer-token check, and the end of a session on DELETE /mcp.

    The dashboard's paths (and the webhook callback) authenticate people, not agents:
    they check a login cookie or a signature themselves (dashboard/auth.py), never the
    agents' bearer token.
    """

    def __init__(
        self, app: Any, *, token: str | None, sessions: HttpSessions, dashboard: Any = None
    ) -> None:
        self.app = app
        self.token = token
        self.sessions = sessions
        self.dashboard = dashboard

    def close(self) -> None:
        if self.dashboard is not None:
            self.dashboard.stop()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
            if (
                self.token
                and not self._own_auth(scope["path"])
                and not _token_ok(headers.get("authorization", ""), self.token)
            ):
                await _unauthorized(send)
                return
            if scope["method"] == "DELETE" and headers.get("mcp-session-id"):
                await self.app(scope, receive, send)
                await anyio.to_thread.run_sync(
                    self.sessions.end, "mcp:" + headers["mcp-session-id"]
                )
                return
        await self.app(scope, receive, send)

    def _own_auth(self, path: str) -> bool:
        if self.dashboard is None:
            return False
        from .dashboard import OPEN_PATHS

        return any(path == p or (p != "/" and path.startswith(p + "/")) for p in OPEN_PATHS)


def _token_ok(header: str, token: str) -> bool:
    scheme, _, value = header.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(value.encode(), token.encode())


async def _unauthorized(send: Any) -> None:
    body = b'{"error": "missing or wrong bearer token"}'
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
        }
    )
    await send({"type": "http.response.body", "body": body})


def serve_http(gateway: Gateway, app: Any, *, host: str, port: int) -> None:
    import signal
    import sys
    import threading
    import time

    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig: int, frame: Any) -> None:
            """SIGTERM/SIGINT: pending asks are denied first ("the gateway is stopping")
            and their calls answered; then uvicorn's shutdown (a second signal: at once)."""
            if stoppers:  # the stop below is under way, or done: uvicorn's shutdown now
                super().handle_exit(sig, frame)
            else:
                stopper = threading.Thread(target=stop, args=(self, sig), daemon=True)
                stoppers.append(stopper)
                stopper.start()
            # uvicorn would re-raise the signal after its shutdown, killing the process
            # before the sessions are closed below; this stop is complete: exit 0.
            self._captured_signals.clear()

    stoppers: list[threading.Thread] = []

    def stop(server: uvicorn.Server, sig: int) -> None:
        sessions = len(gateway.sessions)  # before the denied agents start leaving
        denied = gateway.stopping()
        print(
            f"agentvisor gateway: stopping on {signal.Signals(sig).name}: {denied} pending "
            f"asks denied, {sessions} sessions closing",
            file=sys.stderr,
            flush=True,
        )
        # The denied calls answer their agents before the server stops taking requests.
        deadline = time.monotonic() + 2.0
        while gateway.asks.count() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        server.handle_exit(sig, None)

    # Open event streams (dashboards, MCP GET streams) must not hold a stop forever.
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", lifespan="on", timeout_graceful_shutdown=3
    )
    server = Server(config)
    try:
        server.run()
    finally:
        for stopper in stoppers:  # the denials are written before the sessions close
            stopper.join(10)
        if hasattr(app, "close"):
            app.close()
        gateway.close()
