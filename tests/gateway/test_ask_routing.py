"""Where an ask goes (issue 16): to this gateway's terminal, its own dashboard or webhook,
and to other gateways' people only when the state database is shared on purpose. With
nobody to answer, a call fails fast; the agent is told where it waits; an ask whose last
channel goes away ends at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from mcp.client import Client

from agentvisor.config import config_from_dict
from agentvisor.frontends.mcpserver import build_server
from agentvisor.gateway import Gateway, asks
from agentvisor.state import State
from tests.conftest import requires_bwrap
from tests.gateway.conftest import stdio_params, text

pytestmark = requires_bwrap


class Present:
    """A person's presence on a state database (a dashboard of some gateway), for a while."""

    def __init__(self, state: State) -> None:
        self.state, self.here, self.leave = state, threading.Event(), threading.Event()
        threading.Thread(target=self._run, daemon=True).start()
        assert self.here.wait(10)

    def _run(self) -> None:
        with self.state.approvals.present("someone-elses-dashboard"):
            self.here.set()
            self.leave.wait(120)


@pytest.fixture
def unrelated_dashboard(isolated_home: Any) -> Iterator[State]:
    """A `serve` of another project on the same per-user default state database."""
    state = State()
    person = Present(state)
    yield state
    person.leave.set()


def _ask_over_stdio(gw_env: dict[str, Any]) -> tuple[float, str]:
    async def main() -> tuple[float, str]:
        async with Client(stdio_params(gw_env)) as c:
            start = time.monotonic()
            result = await c.call_tool("terminal", {"command": "sudo -n true; touch ran"})
            return time.monotonic() - start, text(result)

    return anyio.run(main)


def test_stdio_mcp_without_terminal_does_not_ask_an_unrelated_dashboard(
    gw_env: dict[str, Any], unrelated_dashboard: State
) -> None:
    took, said = _ask_over_stdio(gw_env)
    assert took < 10 and "no person can be reached" in said, (took, said)
    assert unrelated_dashboard.approvals.recent() == []  # nothing was put in its queue
    assert not (gw_env["ws"] / "ran").exists()


def test_control_a_database_shared_on_purpose_reaches_its_people(
    gw_env: dict[str, Any], tmp_path: Any, isolated_home: Any
) -> None:
    url = f"sqlite:///{tmp_path / 'team-state.db'}"
    gw_env["config"].write_text(gw_env["config"].read_text() + f"audit:\n  url: {url}\n")
    team = State(url)
    person = Present(team)
    try:
        _, said = _ask_over_stdio(gw_env)  # approvals.timeout is 5 s in these tests
    finally:
        person.leave.set()
    [ask] = team.approvals.recent()
    assert ask.status == "timeout" and "nobody answered at the approval queue" in said, said


def test_the_agent_is_told_where_and_an_ask_ends_when_its_people_leave(
    workspace: Any, tmp_path: Any, isolated_home: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(asks, "PROGRESS_EVERY", 0.3)
    config = config_from_dict(
        {"audit": {"url": f"sqlite:///{tmp_path / 's.db'}"}, "approvals": {"timeout": 120}}
    )
    gw = Gateway(config, workspace=workspace)
    gw.queue_channel.where = "the dashboard http://127.0.0.1:9/dashboard/"
    person = Present(gw.state)
    session = gw.open_session(toolsets=["all"])
    notes: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")

    async def main() -> tuple[float, str]:
        async with Client(build_server(gw, lambda ctx: session)) as c:
            async with anyio.create_task_group() as tg:
                tg.start_soon(_leave_when_asked, gw, person)
                start = time.monotonic()
                result = await c.call_tool(
                    "terminal", {"command": "sudo -n true"}, progress_callback=on_progress
                )
            return time.monotonic() - start, text(result)

    try:
        took, said = anyio.run(main)
    finally:
        person.leave.set()
        gw.close()
    assert notes and notes[0].startswith(
        "waiting for a person to approve at the dashboard http://127.0.0.1:9/dashboard/, 1:5"
    ), notes
    assert took < 30 and "nobody can answer it any more" in said, (took, said)


async def _leave_when_asked(gw: Gateway, person: Present) -> None:
    while not gw.asks.count():
        await anyio.sleep(0.05)
    person.leave.set()
