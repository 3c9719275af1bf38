"""Network asks of sandboxed commands (issue 15 points 2, 3, outside MCP): a session's
egress proxy asks the gateway's people and audit log, its pending asks hold no shared
worker, are capped like every ask and are withdrawn when the proxy client goes away.

Real parts: bwrap sandboxes under ``sandbox.network: proxy``, a loopback HTTP server, the
real MCP client. The server listens on 127.0.0.2: 127.0.0.1 is the sandbox's own loopback
(NO_PROXY), 127.0.0.2 is reached through the proxy, allowed by an exact rule."""

from __future__ import annotations

import contextlib
import statistics
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from agentvisor.actions import Action, Context, Decision
from agentvisor.config import config_from_dict
from agentvisor.gateway import Gateway, Session
from agentvisor.net.access import caller_gone
from agentvisor.state.asks import Answer
from tests.conftest import requires_bwrap
from tests.gateway.conftest import text
from tests.gateway.test_async_asks import Silent, client, until

pytestmark = requires_bwrap

ASKED = "http://asked.example.test/"  # an ask rule; never resolved unless approved
# Prints the status, or the proxy's refusal with its reason and rule.
GET = (
    'python3 -c "import sys, urllib.request as u, urllib.error as e\n'
    "try: print(u.urlopen(sys.argv[1], timeout=float(sys.argv[2])).status)\n"
    "except e.HTTPError as x: print(x.code, x.headers['x-agentvisor-reason'], "
    "x.headers['x-agentvisor-rule'])\" "
)


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


@pytest.fixture
def allowed_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.2", 0), _Ok)
    server.request_queue_size = 256
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.2:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture
def make(workspace: Path, tmp_path: Path, isolated_home: Path, allowed_url: str) -> Iterator[Any]:
    made: list[Gateway] = []

    def make_gateway(per_session: int = 16, per_client: int = 64) -> tuple[Gateway, Silent]:
        host = allowed_url.split("/")[2]
        config = config_from_dict(
            {
                "audit": {"url": f"sqlite:///{tmp_path / 'state.db'}"},
                "approvals": {
                    "timeout": 120,
                    "max_pending_per_session": per_session,
                    "max_pending_per_client": per_client,
                },
                # 100 calls of one client run at once here: above the default quota of 32.
                "gateway": {"max_calls_per_client": 200},
                "sandbox": {"network": "proxy", "timeout": 120},
                "rules": [
                    {"decision": "allow", "kind": "fetch", "pattern": host},
                    {"decision": "ask", "kind": "fetch", "pattern": "asked.example.test"},
                ],
            }
        )
        gw = Gateway(config, workspace=workspace)
        silent = Silent()
        gw.broker.channels = [silent]
        made.append(gw)
        return gw, silent

    yield make_gateway
    for gw in made:
        gw.close()


def fetch(url: str, timeout: float = 110) -> dict[str, Any]:
    return {"command": f"{GET}{url} {timeout}"}


async def median_latency(c: Client, tool: str, arguments: dict[str, Any], n: int) -> float:
    """The best of three medians of ``n`` calls: a shared machine's hiccups filtered."""
    medians = []
    for _ in range(3):
        took = []
        for _ in range(n):
            start = time.perf_counter()
            result = await c.call_tool(tool, arguments)
            took.append(time.perf_counter() - start)
            assert not result.is_error, text(result)
        medians.append(statistics.median(took))
    return min(medians)


def test_pending_network_asks_hold_no_worker_and_others_keep_going(
    make: Any, workspace: Path, allowed_url: str
) -> None:
    """100 sandboxed commands wait for a person to approve their destination; another
    session's read_file stays within 2x of its unloaded latency and its own proxied
    request completes while all 100 are still pending."""
    gw, silent = make(per_session=10, per_client=100)
    agents = [gw.open_session(toolsets=["all"], client="agent-a") for _ in range(10)]
    other = gw.open_session(toolsets=["all"], client="agent-b")
    (workspace / "notes.txt").write_text("hello\n")
    read = ("read_file", {"path": "notes.txt"})
    outcomes: list[str] = []

    async def asking(c: Client) -> None:
        outcomes.append(text(await c.call_tool("terminal", fetch(ASKED))))

    async def main() -> tuple[float, float, str]:
        async with client(gw, other) as reader, contextlib.AsyncExitStack() as stack:
            probe = text(await reader.call_tool("terminal", fetch(allowed_url)))
            assert probe.startswith("200"), probe  # control: the proxied request works
            await median_latency(reader, *read, n=5)  # warm up
            unloaded = await median_latency(reader, *read, n=15)
            clients = [await stack.enter_async_context(client(gw, s)) for s in agents]
            async with anyio.create_task_group() as tg:
                for n in range(100):
                    tg.start_soon(asking, clients[n % 10])
                await until(lambda: gw.asks.count() == 100, timeout=120)
                loaded = await median_latency(reader, *read, n=15)
                proxied = text(await reader.call_tool("terminal", fetch(allowed_url)))
                assert gw.asks.count() == 100 and not outcomes  # all still waiting
                gw.asks.withdraw("the test is over")
            return unloaded, loaded, proxied

    unloaded, loaded, proxied = anyio.run(main)
    print(f"read_file median: unloaded {unloaded * 1000:.1f} ms, 100 asks {loaded * 1000:.1f} ms")
    assert proxied.startswith("200"), proxied
    assert loaded <= 2 * max(unloaded, 0.005), (unloaded, loaded)
    assert len(outcomes) == 100 and all("gateway:withdrawn" in o for o in outcomes), outcomes[0]
    assert len(silent.outcomes) == 100 and all(o.startswith("withdrawn") for o in silent.outcomes)


def run_asking(gw: Gateway, session: Session, command: dict[str, Any], answer: Any) -> str:
    """``command`` in ``session`` while ``answer(gw)`` acts on its ask; the command's output."""

    async def main() -> str:
        async with client(gw, session) as c, anyio.create_task_group() as tg:
            said: list[str] = []

            async def call() -> None:
                said.append(text(await c.call_tool("terminal", command)))

            tg.start_soon(call)
            await answer(gw)
            await until(lambda: bool(said), timeout=60)
        return said[0]

    return anyio.run(main)


def test_control_an_approved_network_ask_goes_on_and_is_audited(make: Any) -> None:
    """A person's answer reaches the proxy: the request goes on past the policy to the
    name's lookup (the asked name does not exist, so the lookup is what refuses it)."""
    gw, silent = make()
    session = gw.open_session(toolsets=["all"])

    async def approve(gw: Gateway) -> None:
        await until(lambda: len(silent.submits) == 1, timeout=60)
        assert silent.submits[0](Answer("once", "silent", "tester"))

    said = run_asking(gw, session, fetch(ASKED), approve)
    assert said.startswith("403") and "guard:dns" in said, said
    events = gw.state.audit.events(kind="network")
    assert any(e.session == session.id and "asked.example.test" in (e.result or "") for e in events)


def test_network_asks_are_capped_per_session(make: Any) -> None:
    gw, silent = make(per_session=2, per_client=10)
    session = gw.open_session(toolsets=["all"])

    async def main() -> str:
        async with client(gw, session) as c, anyio.create_task_group() as tg:
            for _ in range(2):
                tg.start_soon(c.call_tool, "terminal", fetch(ASKED))
            await until(lambda: gw.asks.count() == 2, timeout=60)
            over = text(await c.call_tool("terminal", fetch(ASKED)))
            gw.asks.withdraw("the test is over")
        return over

    over = anyio.run(main)
    assert over.startswith("403") and "gateway:ask-limit" in over, over
    assert "this session already has 2 asks waiting" in over, over
    assert len(silent.submits) == 2  # the third never reached a person


def test_a_proxy_client_that_goes_away_withdraws_its_ask(make: Any) -> None:
    """The sandboxed client gives up (its own timeout) while its destination waits for a
    person: the ask is withdrawn and recorded so, and a later answer opens nothing."""
    gw, silent = make()
    session = gw.open_session(toolsets=["all"])

    async def let_it_give_up(gw: Gateway) -> None:
        await until(lambda: len(silent.submits) == 1, timeout=60)

    said = run_asking(gw, session, fetch(ASKED, timeout=3), let_it_give_up)
    assert "timed out" in said, said
    deadline = time.monotonic() + 10
    while not silent.outcomes:
        assert time.monotonic() < deadline, "the ask outlived its proxy client"
        time.sleep(0.05)
    assert silent.outcomes == ["withdrawn: its caller went away (disconnected or cancelled)"]
    assert not silent.submits[0](Answer("once", "silent", "late"))
    assert gw.asks.count() == 0
    refused = [e for e in gw.state.audit.events(kind="network") if e.rule == "gateway:withdrawn"]
    assert len(refused) == 1 and refused[0].decision == "deny", refused


def test_a_cancelled_web_tool_call_withdraws_its_network_ask(make: Any) -> None:
    """A web tool's ask waits in the call's own thread; the MCP client cancelling the
    call withdraws it (recorded so), and a later answer sends nothing."""
    gw, silent = make()
    session = gw.open_session(toolsets=["all"])

    async def main() -> None:
        async with client(gw, session) as c, anyio.create_task_group() as tg:
            tg.start_soon(c.call_tool, "web_extract", {"url": ASKED})
            await until(lambda: len(silent.submits) == 1, timeout=60)
            assert gw.asks.count() == 1  # capped and counted like every ask
            tg.cancel_scope.cancel()

    anyio.run(main)
    deadline = time.monotonic() + 10
    while not silent.outcomes:
        assert time.monotonic() < deadline, "the ask outlived its cancelled call"
        time.sleep(0.05)
    assert silent.outcomes == ["withdrawn: its caller went away (disconnected or cancelled)"]
    assert not silent.submits[0](Answer("once", "silent", "late"))
    refused = [e for e in gw.state.audit.events(kind="network") if e.rule == "gateway:withdrawn"]
    assert len(refused) == 1 and refused[0].session == session.id, refused


class Slow(Silent):
    """A channel that takes its time to put the ask to a person (a slow webhook)."""

    def __init__(self) -> None:
        super().__init__()
        self.asking, self.go_on = threading.Event(), threading.Event()

    def ask(self, request: Any, submit: Any) -> None:
        self.asking.set()
        assert self.go_on.wait(30)
        super().ask(request, submit)


def test_an_ask_opened_while_its_session_closes_is_withdrawn(make: Any) -> None:
    gw, _ = make()
    slow = Slow()
    gw.broker.channels = [slow]
    session = gw.open_session(toolsets=["all"])

    async def main() -> str:
        async with client(gw, session) as c, anyio.create_task_group() as tg:
            said: list[str] = []

            async def call() -> None:
                said.append(text(await c.call_tool("web_extract", {"url": ASKED})))

            tg.start_soon(call)
            await anyio.to_thread.run_sync(slow.asking.wait, 30)
            await anyio.to_thread.run_sync(gw.close_session, session)
            slow.go_on.set()  # the ask is opened now, after its session closed
            await until(lambda: bool(said), timeout=20)
        return said[0]

    said = anyio.run(main)
    assert "the session closed" in said and "withdrawn" in said, said
    assert slow.outcomes == ["withdrawn: the session closed"]
    assert not slow.submits[0](Answer("once", "silent", "late"))


def test_asks_of_an_upstream_servers_proxy_are_capped_and_bound_too(make: Any) -> None:
    """Not a session's: an upstream MCP server's own proxy (``upstream:NAME``)."""
    gw, silent = make(per_session=2, per_client=10)
    action = Action("fetch", "asked.example.test:443", method="CONNECT")
    context = Context(tool="proxy", session="upstream:demo")
    gone = threading.Event()
    answers: list[Decision] = []

    def ask() -> None:
        caller_gone.set(gone.is_set)  # as the proxy sets it for its connection
        answers.append(gw.resolve_ask(action, context, Decision("ask", "a rule asks")))

    waiting = [threading.Thread(target=ask, daemon=True) for _ in range(2)]
    for thread in waiting:
        thread.start()
    deadline = time.monotonic() + 10
    while gw.asks.count() < 2:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    over = gw.resolve_ask(action, context, Decision("ask", "a rule asks"))
    assert over.verdict == "deny" and over.rule == "gateway:ask-limit", over
    gone.set()  # the proxy's clients went away
    for thread in waiting:
        thread.join(10)
    assert [a.rule for a in answers] == ["gateway:withdrawn"] * 2, answers
    assert len(silent.submits) == 2


def test_the_python_apis_blocking_call_is_capped_and_withdrawn_with_its_session(
    make: Any, workspace: Path
) -> None:
    """`Gateway.call` waits in the caller's own thread, under the same caps; closing the
    session withdraws its ask and nothing runs."""
    gw, silent = make(per_session=1)
    session = gw.open_session(toolsets=["all"])
    said: list[str] = []
    waiting = threading.Thread(
        target=lambda: said.append(
            gw.call(session, "terminal", {"command": "sudo -n true; touch ran"}).text
        ),
        daemon=True,
    )
    waiting.start()
    deadline = time.monotonic() + 30
    while gw.asks.count() < 1:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    over = gw.call(session, "terminal", {"command": "sudo -n true"}).text
    assert "gateway:ask-limit" in over and "max_pending_per_session" in over, over
    gw.close_session(session)
    waiting.join(10)
    assert said and "gateway:withdrawn" in said[0] and "the session closed" in said[0], said
    assert len(silent.submits) == 1 and not silent.submits[0](Answer("once", "silent", "late"))
    assert not (workspace / "ran").exists()
