"""A prompt, explicit stop: SIGTERM on `agentvisor serve` denies pending asks as "the
gateway is stopping", closes the sessions, prints one line and exits within seconds
(issue 15 point 10). A real `serve` process, a real MCP client over HTTP."""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import anyio
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from agentvisor.state import State
from tests.conftest import requires_bwrap
from tests.gateway.conftest import serve, text

pytestmark = requires_bwrap


def test_sigterm_denies_pending_asks_closes_sessions_and_exits_promptly(
    gw_env: dict[str, Any],
) -> None:
    url = f"sqlite:///{gw_env['ws'].parent / 'shared-state.db'}"
    config = (
        gw_env["config"]
        .read_text()
        .replace("approvals:\n  timeout: 5", "approvals:\n  timeout: 120")
    )
    assert "timeout: 120" in config  # an ask that would otherwise wait two minutes
    gw_env["config"].write_text(config + f"audit:\n  url: {url}\n")
    state = State(url)
    present, leave = threading.Event(), threading.Event()

    def dashboard_user() -> None:  # a person who could answer, and does not
        with state.approvals.present("test-dashboard"):
            present.set()
            leave.wait(60)

    threading.Thread(target=dashboard_user, daemon=True).start()
    assert present.wait(10)
    said: list[str] = []
    try:
        with serve(gw_env) as (mcp_url, proc):

            async def main() -> float:
                client = Client(
                    streamable_http_client(mcp_url, http_client=httpx2.AsyncClient()),
                    mode="legacy",
                )
                async with client as c, anyio.create_task_group() as tg:

                    async def call() -> None:
                        result = await c.call_tool(
                            "terminal", {"command": "sudo -n true; touch ran"}
                        )
                        said.append(text(result))

                    tg.start_soon(call)
                    deadline = time.monotonic() + 30
                    while not state.approvals.pending():
                        assert time.monotonic() < deadline, "the ask never reached the queue"
                        await anyio.sleep(0.05)
                    sent = time.monotonic()
                    proc.send_signal(signal.SIGTERM)
                return sent

            sent = anyio.run(main)
            proc.wait(15)
            took = time.monotonic() - sent
            stderr = proc.communicate()[1]
    finally:
        leave.set()

    assert took < 5, f"serve took {took:.1f} s to stop"
    assert proc.returncode == 0, stderr
    stops = [line for line in stderr.splitlines() if "stopping on SIGTERM" in line]
    assert stops == [
        "agentvisor gateway: stopping on SIGTERM: 1 pending asks denied, 1 sessions closing"
    ], stderr
    assert "Traceback" not in stderr
    assert said and "the gateway is stopping" in said[0] and "Refused" in said[0], said
    assert not (gw_env["ws"] / "ran").exists()
    [ask] = state.approvals.recent()
    assert ask.status == "withdrawn" and "the gateway is stopping" in (ask.outcome or "")
    closed = [e for e in state.audit.events(kind="sandbox") if e.result == "session closed"]
    assert closed, "the session was closed"
