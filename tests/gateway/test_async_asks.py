"""Asks wait without holding a worker thread, are capped per session and per client, and
belong to their caller: cancelled or disconnected, an ask is withdrawn and a later answer
runs nothing (issue 15 points 2, 3). Everything goes through the real MCP client into a
gateway with bwrap sandboxes."""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from agentvisor.config import config_from_dict
from agentvisor.errors import QuotaExceeded
from agentvisor.frontends.mcpserver import build_server
from agentvisor.gateway import Gateway, Session, asks
from agentvisor.state import State
from agentvisor.state.asks import Answer, ApprovalRequest
from tests.conftest import requires_bwrap
from tests.gateway.conftest import stdio_params, text

pytestmark = requires_bwrap


class Silent:
    """A channel a person could answer on, who does not (yet): keeps each ask's submit."""

    name = "silent"

    def __init__(self) -> None:
        self.submits: list[Any] = []
        self.outcomes: list[str] = []

    def available(self) -> bool:
        return True

    def ask(self, request: ApprovalRequest, submit: Any) -> None:
        self.submits.append(submit)

    def cancel(self, request: ApprovalRequest, outcome: str) -> None:
        self.outcomes.append(outcome)


@pytest.fixture
def make(workspace: Path, tmp_path: Path, isolated_home: Path) -> Iterator[Any]:
    made: list[Gateway] = []

    def make_gateway(caps: dict[str, int] | None = None, silent: Silent | None = None) -> Gateway:
        config = config_from_dict(
            {
                "audit": {"url": f"sqlite:///{tmp_path / 'state.db'}"},
                "approvals": {"timeout": 60, **(caps or {})},
                # 100 calls of one client run at once here: above the default quota of 32.
                "gateway": {"max_calls_per_client": 200},
            }
        )
        gw = Gateway(config, workspace=workspace)
        if silent is not None:
            gw.broker.channels = [silent]
        made.append(gw)
        return gw

    yield make_gateway
    for gw in made:
        gw.close()


def client(gw: Gateway, session: Session) -> Client:
    return Client(build_server(gw, lambda ctx: session))


async def until(check: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting"
        await anyio.sleep(0.05)


def test_pending_asks_hold_no_worker_and_others_stay_fast(make: Any, workspace: Path) -> None:
    silent = Silent()
    gw = make({"max_pending_per_session": 10, "max_pending_per_client": 100}, silent)
    sessions = [gw.open_session(toolsets=["all"], client="agent-a") for _ in range(10)]
    other = gw.open_session(toolsets=["all"], client="agent-b")
    (workspace / "notes.txt").write_text("hello\n")

    async def read_latency(c: Client) -> float:
        """The best of three medians of 15 calls: a shared machine's hiccups filtered."""
        medians = []
        for _ in range(3):
            took = []
            for _ in range(15):
                start = time.perf_counter()
                result = await c.call_tool("read_file", {"path": "notes.txt"})
                took.append(time.perf_counter() - start)
                assert not result.is_error, text(result)
            medians.append(statistics.median(took))
        return min(medians)

    async def ask(c: Client, n: int) -> None:
        await c.call_tool("terminal", {"command": f"sudo -n true; touch ran-{n}"})

    async def main() -> tuple[float, float]:
        async with client(gw, other) as reader, contextlib.AsyncExitStack() as stack:
            await read_latency(reader)  # warm up
            unloaded = await read_latency(reader)
            clients = [await stack.enter_async_context(client(gw, s)) for s in sessions]
            async with anyio.create_task_group() as tg:
                for n in range(100):
                    tg.start_soon(ask, clients[n % 10], n)
                await until(lambda: gw.asks.count() == 100)
                loaded = await read_latency(reader)
                tg.cancel_scope.cancel()  # the agents give up: their asks are withdrawn
            return unloaded, loaded

    unloaded, loaded = anyio.run(main)
    print(f"read_file median: unloaded {unloaded * 1000:.1f} ms, 100 asks {loaded * 1000:.1f} ms")
    assert loaded <= 2 * max(unloaded, 0.005), (unloaded, loaded)

    # Withdrawn, all of them; an answer that comes now runs nothing.
    deadline = time.monotonic() + 20
    while gw.asks.count() or len(silent.outcomes) < 100:
        assert time.monotonic() < deadline, (gw.asks.count(), len(silent.outcomes))
        time.sleep(0.05)
    assert all(o.startswith("withdrawn") for o in silent.outcomes)
    assert not any(submit(Answer("once", "silent", "late")) for submit in silent.submits)
    time.sleep(0.5)
    assert not list(workspace.glob("ran-*"))


def test_control_an_answered_ask_runs(make: Any, workspace: Path) -> None:
    silent = Silent()
    gw = make(silent=silent)
    session = gw.open_session(toolsets=["all"])

    async def main() -> str:
        async with client(gw, session) as c, anyio.create_task_group() as tg:
            results: list[str] = []

            async def call() -> None:
                result = await c.call_tool("terminal", {"command": "sudo -n true; touch ran"})
                results.append(text(result))

            tg.start_soon(call)
            await until(lambda: len(silent.submits) == 1)
            assert silent.submits[0](Answer("once", "silent", "tester"))
        return results[0]

    anyio.run(main)
    assert (workspace / "ran").exists()


def test_asks_are_capped_per_session_and_per_client(make: Any) -> None:
    silent = Silent()
    # Lowered from the defaults (16, 64) in the configuration: the lowered caps apply.
    gw = make({"max_pending_per_session": 2, "max_pending_per_client": 3}, silent)
    first, second = (gw.open_session(toolsets=["all"], client="agent-a") for _ in range(2))

    async def main() -> list[str]:
        refusals: list[str] = []
        async with (
            client(gw, first) as a,
            client(gw, second) as b,
            anyio.create_task_group() as tg,
        ):
            for c in (a, a):
                tg.start_soon(c.call_tool, "terminal", {"command": "sudo -n true"})
            await until(lambda: gw.asks.count() == 2)
            over = await a.call_tool("terminal", {"command": "sudo -n true"})
            refusals.append(text(over))
            tg.start_soon(b.call_tool, "terminal", {"command": "sudo -n true"})
            await until(lambda: gw.asks.count() == 3)
            over = await b.call_tool("terminal", {"command": "sudo -n true"})
            refusals.append(text(over))
            tg.cancel_scope.cancel()
        return refusals

    by_session, by_client = anyio.run(main)
    assert "gateway:ask-limit" in by_session and "this session already has 2" in by_session
    assert "approvals.max_pending_per_session" in by_session
    assert "gateway:ask-limit" in by_client and "this client already has 3" in by_client
    assert "approvals.max_pending_per_client" in by_client


def test_a_cancelled_ask_is_withdrawn_recorded_and_a_late_answer_runs_nothing(
    make: Any, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the shared queue (as the dashboard answers), with progress notifications."""
    monkeypatch.setattr(asks, "PROGRESS_EVERY", 0.3)
    gw = make()
    queue = gw.state.approvals
    session = gw.open_session(toolsets=["all"])
    present = threading.Event()
    stop = threading.Event()

    def person_present() -> None:
        with queue.present("test-dashboard"):
            present.set()
            stop.wait(60)

    threading.Thread(target=person_present, daemon=True).start()
    assert present.wait(10)
    notes: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")

    async def main() -> None:
        async with client(gw, session) as c, anyio.create_task_group() as tg:
            tg.start_soon(
                lambda: c.call_tool(
                    "terminal",
                    {"command": "sudo -n true; touch ran"},
                    progress_callback=on_progress,
                )
            )
            await until(lambda: len(queue.pending()) == 1)
            await until(lambda: len(notes) >= 2)
            tg.cancel_scope.cancel()

    try:
        anyio.run(main)
        [ask] = [a for a in queue.recent() if a.session == session.id]
        deadline = time.monotonic() + 10
        while (ask := queue.get(ask.id) or ask).status == "pending":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert ask.status == "withdrawn", ask
        late = queue.answer(ask.id, Answer("once", "web", "tester"))
        assert not late and "withdrawn" in late.message
        time.sleep(1.0)
        assert not (workspace / "ran").exists()
        events = [e for e in gw.state.audit.events(kind="approval") if e.ref == ask.id]
        assert any((e.result or "").startswith("withdrawn") for e in events), events
        assert "waiting for a person to approve" in notes[0] and "left" in notes[0]
    finally:
        stop.set()


def test_closing_the_session_withdraws_its_ask(make: Any, workspace: Path) -> None:
    silent = Silent()
    gw = make(silent=silent)
    session = gw.open_session(toolsets=["all"])

    async def main() -> str:
        async with client(gw, session) as c:
            results: list[str] = []
            async with anyio.create_task_group() as tg:

                async def call() -> None:
                    result = await c.call_tool("terminal", {"command": "sudo -n true; touch ran"})
                    results.append(text(result))

                tg.start_soon(call)
                await until(lambda: gw.asks.count() == 1)
                await anyio.to_thread.run_sync(gw.close_session, session)
            return results[0]

    said = anyio.run(main)
    assert "gateway:withdrawn" in said and "the session closed" in said, said
    assert not silent.submits[0](Answer("once", "silent", "late"))
    assert not (workspace / "ran").exists()


def test_a_disconnected_stdio_client_withdraws_its_ask(gw_env: dict[str, Any]) -> None:
    """`agentvisor mcp` as a real process: its client goes away while an ask waits."""
    url = f"sqlite:///{gw_env['ws'].parent / 'shared-state.db'}"
    gw_env["config"].write_text(gw_env["config"].read_text() + f"audit:\n  url: {url}\n")
    queue = State(url).approvals
    stop = threading.Event()
    present = threading.Event()

    def person_present() -> None:
        with queue.present("test-dashboard"):
            present.set()
            stop.wait(60)

    threading.Thread(target=person_present, daemon=True).start()
    assert present.wait(10)

    async def main() -> None:
        async with Client(stdio_params(gw_env)) as c, anyio.create_task_group() as tg:
            tg.start_soon(c.call_tool, "terminal", {"command": "sudo -n true; touch ran"})
            await until(lambda: len(queue.pending()) == 1, timeout=30)
            tg.cancel_scope.cancel()  # and the client closes: the agent is gone

    try:
        anyio.run(main)
        [ask] = queue.recent()
        deadline = time.monotonic() + 20
        while (ask := queue.get(ask.id) or ask).status == "pending":
            assert time.monotonic() < deadline, "the ask outlived its client"
            time.sleep(0.1)
        assert ask.status == "withdrawn", ask
        assert not queue.answer(ask.id, Answer("once", "web", "tester"))
        time.sleep(0.5)
        assert not (gw_env["ws"] / "ran").exists()
    finally:
        stop.set()


def test_client_quotas_for_sessions_and_running_calls(
    workspace: Path, tmp_path: Path, isolated_home: Path
) -> None:
    config = config_from_dict(
        {
            "audit": {"url": f"sqlite:///{tmp_path / 'q.db'}"},
            "approvals": {"timeout": 60},
            "gateway": {"max_sessions_per_client": 2, "max_calls_per_client": 2},
        }
    )
    silent = Silent()
    gw = Gateway(config, workspace=workspace)
    gw.broker.channels = [silent]
    try:
        first, second = (gw.open_session(toolsets=["all"], client="agent-a") for _ in range(2))
        quota = "client agent-a already has 2 sessions open .*gateway.max_sessions_per_client"
        with pytest.raises(QuotaExceeded, match=quota):
            gw.open_session(client="agent-a")
        other = gw.open_session(toolsets=["all"], client="agent-b")  # control

        async def main() -> tuple[str, bool]:
            async with (
                client(gw, first) as a,
                client(gw, second) as b,
                client(gw, other) as c,
                anyio.create_task_group() as tg,
            ):
                for _ in range(2):  # two calls of agent-a running (waiting for a person)
                    tg.start_soon(a.call_tool, "terminal", {"command": "sudo -n true"})
                await until(lambda: gw.asks.count() == 2)
                over = await b.call_tool("terminal", {"command": "echo third"})
                fine = await c.call_tool("terminal", {"command": "echo other"})
                tg.cancel_scope.cancel()
            return text(over), bool(fine.is_error)

        over, fine_failed = anyio.run(main)
    finally:
        gw.close()
    assert "client agent-a already has 2 calls running (the client quota is 2" in over, over
    assert "gateway.max_calls_per_client" in over
    assert not fine_failed
    refused = [e for e in gw.state.audit.events(kind="call") if e.rule == "gateway:quota"]
    assert len(refused) == 1 and refused[0].decision == "deny"
