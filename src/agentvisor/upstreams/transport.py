"""An MCP transport to a stdio server that runs inside agentvisor's sandbox.

The SDK's own ``stdio_client`` starts its command as a plain host process. Here the
command runs through `Sandbox.run_attached` instead (namespaces, no capabilities,
seccomp, limits, no network but the egress proxy's relay), with two pipes of ours as
its stdin and stdout; this module speaks newline-delimited JSON-RPC over those pipes,
as the SDK's stdio transport does.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
from mcp.client._transport import TransportStreams
from mcp.shared.message import SessionMessage

if TYPE_CHECKING:
    from ..sandbox import Attachment, Sandbox

# An upstream server lives as long as the gateway; the sandbox runner needs a finite
# deadline that fits poll()'s millisecond int, so a server is ended after this long.
SERVER_LIFETIME = 20 * 24 * 3600.0


class SandboxedProcess:
    """One server process in the sandbox, with pipes to its stdin and stdout."""

    def __init__(
        self,
        sandbox: Sandbox,
        argv: Sequence[str],
        *,
        attachment: Attachment | None,
        cwd: str | None,
        stderr_fd: int,
    ) -> None:
        child_in, self.stdin = os.pipe()
        self.stdout, child_out = os.pipe()
        cancel_read, self._cancel = os.pipe()
        self.ended = threading.Event()
        self.error: str | None = None
        self._child_fds = (child_in, child_out, cancel_read)

        def run() -> None:
            try:
                result = sandbox.run_attached(
                    list(argv),
                    stdio=(child_in, child_out, stderr_fd),
                    cancel_fd=cancel_read,
                    cwd=cwd,
                    timeout=SERVER_LIFETIME,
                    attachment=attachment,
                )
                self.error = f"the server exited with status {result.exit_code}"
            except Exception as exc:  # reported to the client as the connection's end
                self.error = f"the server could not start in the sandbox: {exc}"
            finally:
                # Our copies of the child's ends: closing them lets our reader see EOF.
                for fd in self._child_fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                self.ended.set()

        threading.Thread(target=run, name="agentvisor-upstream", daemon=True).start()

    def stop(self, grace: float = 2.0) -> None:
        """Close its stdin (the MCP way to ask a stdio server to leave), then kill it."""
        with contextlib.suppress(OSError):
            os.close(self.stdin)
        if not self.ended.wait(grace):
            with contextlib.suppress(OSError):
                os.write(self._cancel, b"x")
            self.ended.wait(grace)
        for fd in (self.stdout, self._cancel):
            with contextlib.suppress(OSError):
                os.close(fd)


@contextlib.asynccontextmanager
async def sandboxed_stdio(process: SandboxedProcess) -> AsyncIterator[TransportStreams]:
    """Read and write streams of `SessionMessage` over a `SandboxedProcess`'s pipes."""
    incoming_w, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    outgoing, outgoing_r = anyio.create_memory_object_stream[SessionMessage](16)
    os.set_blocking(process.stdout, False)

    async def read_lines() -> None:
        buffer = b""
        async with incoming_w:
            while True:
                await anyio.wait_readable(process.stdout)
                try:
                    chunk = os.read(process.stdout, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    return
                *lines, buffer = (buffer + chunk).split(b"\n")
                for line in lines:
                    if line.strip():
                        await incoming_w.send(_parse(line))

    async def write_lines() -> None:
        async with outgoing_r:
            async for message in outgoing_r:
                data = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                # A blocking write in a worker thread: a full pipe must not stall the loop.
                await anyio.to_thread.run_sync(_write_all, process.stdin, data.encode() + b"\n")

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(read_lines)
        tasks.start_soon(write_lines)
        try:
            yield incoming, outgoing
        finally:
            tasks.cancel_scope.cancel()
            await anyio.to_thread.run_sync(process.stop)


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
    except ValueError as exc:
        return exc


def _write_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]
