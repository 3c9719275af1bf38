"""A synchronous handle on one upstream MCP server, for the gateway's worker threads.

The official MCP SDK client is asynchronous; each upstream gets one event loop in a
thread of its own (an anyio blocking portal), and gateway threads call into it. A stdio
server runs in the sandbox (`transport.SandboxedProcess`); an HTTP server is reached by
the HTTP client ``http_client()`` makes: `net.client.guarded_async_client`, whose every
request the destination guard and the policy admit first, and whose connections go only
to the addresses they checked.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import AgentvisorError
from .pins import ToolText

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

    from ..config import UpstreamConfig
    from ..sandbox import Attachment, Sandbox


class UpstreamError(AgentvisorError):
    """An upstream server could not be started, reached, or answered with an error."""


class UpstreamClient:
    def __init__(
        self,
        settings: UpstreamConfig,
        *,
        sandbox: Sandbox | None = None,
        attachment: Attachment | None = None,
        http_client: Callable[[], Any] | None = None,
    ) -> None:
        """``http_client()``: a guarded ``httpx2.AsyncClient`` for an HTTP server."""
        self.settings = settings
        self._sandbox = sandbox
        self._attachment = attachment
        self._http_client = http_client
        self._stack = contextlib.ExitStack()
        self._portal: BlockingPortal | None = None
        self._client: Any = None

    def start(self) -> UpstreamClient:
        from anyio.from_thread import start_blocking_portal
        from mcp.client import Client

        try:
            self._portal = self._stack.enter_context(start_blocking_portal())
            client = Client(
                self._transport(), cache=None, read_timeout_seconds=self.settings.timeout
            )
            self._client = self._stack.enter_context(
                self._portal.wrap_async_context_manager(client)
            )
        except Exception as exc:
            self.close()
            raise UpstreamError(
                f"upstream {self.settings.name}: cannot connect: {_why(exc)}"
            ) from None
        return self

    def _transport(self) -> Any:
        if self.settings.command:
            return self._stdio()
        from mcp.client.streamable_http import streamable_http_client

        if self._http_client is None:
            raise UpstreamError(f"upstream {self.settings.name}: an HTTP server needs the guard")
        return streamable_http_client(self.settings.url or "", http_client=self._http_client())

    def _stdio(self) -> Any:
        from .transport import SandboxedProcess, sandboxed_stdio

        if self._sandbox is None:
            raise UpstreamError(f"upstream {self.settings.name}: a stdio server needs a sandbox")
        process = SandboxedProcess(
            self._sandbox,
            self.settings.command,
            attachment=self._attachment,
            cwd=self.settings.cwd,
            stderr_fd=sys.stderr.fileno(),
        )
        return sandboxed_stdio(process)

    # -- calls --------------------------------------------------------------------------

    def list_tools(self) -> list[ToolText]:
        result = self._call(lambda client: client.list_tools())
        return [
            ToolText(
                name=tool.name,
                description=tool.description or "",
                input_schema=dict(tool.input_schema or {"type": "object"}),
            )
            for tool in result.tools
        ]

    def call_tool(self, name: str, arguments: dict[str, Any]) -> tuple[str, bool]:
        """The tool's answer as text, and whether the server marked it an error."""
        result = self._call(lambda client: client.call_tool(name, arguments))
        return _text(result), bool(result.is_error)

    def _call(self, make: Callable[[Any], Any]) -> Any:
        if self._portal is None or self._client is None:
            raise UpstreamError(f"upstream {self.settings.name} is not connected")
        client = self._client

        async def run() -> Any:
            return await make(client)

        try:
            return self._portal.call(run)
        except AgentvisorError:
            raise
        except Exception as exc:
            raise UpstreamError(f"upstream {self.settings.name}: {_why(exc)}") from None

    def close(self) -> None:
        self._client = None
        with contextlib.suppress(Exception):
            self._stack.close()
        self._portal = None


def _text(result: Any) -> str:
    parts = []
    for item in result.content or []:
        text = getattr(item, "text", None)
        if text is not None:
            parts.append(text)
        else:
            parts.append(f"[{getattr(item, 'type', 'content')} omitted]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _why(exc: BaseException) -> str:
    """The innermost message of an exception group (the SDK raises them from task groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__
