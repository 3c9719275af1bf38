"""Several gateways, one truth — end to end through the MCP SDK client.

Two `agentvisor serve` processes on one PostgreSQL: an ask raised through one is answered
on the other's dashboard API and the waiting MCP call completes; a later answer through
the queue API (as a webhook would) is refused. And the
fault test: kill -9 a gateway during calls, restart it: the log verifies, every call that
returned is in it, and the ask that was pending is expired as denied.
"""

from __future__ import annotations

import getpass
import json
import signal
import threading
import time

import anyio
import httpx
import pytest
from mcp.client import Client

from agentvisor.approvals import Answer
from agentvisor.state import State
from tests.conftest import requires_bwrap, run_cli
from tests.gateway.conftest import free_port, serve, text

pytestmark = requires_bwrap

CONFIG = """
sandbox:
  timeout: 30
approvals:
  timeout: 60
audit:
  url: "{url}"
rules:
  - {{decision: ask, kind: read, pattern: "ask-me.txt"}}
"""


@pytest.fixture
def env_for(tmp_path, isolated_home):
    import os

    def make(url: str, name: str = "gw") -> dict:
        ws = tmp_path / name / "ws"
        ws.mkdir(parents=True)
        (ws / "ask-me.txt").write_text("the guarded content\n")
        config = tmp_path / name / "agentvisor.yaml"
        config.write_text(CONFIG.format(url=url))
        return {
            "ws": ws,
            "config": config,
            "home": isolated_home,
            "env": dict(os.environ, HOME=str(isolated_home)),
        }

    return make


def answer_on_dashboard(url_mcp: str, ask_id: str, choice: str) -> dict:
    """Answer as a person in a browser on the gateway's dashboard would (docs/dashboard.md)."""
    base = url_mcp.removesuffix("/mcp")
    with httpx.Client(base_url=base, headers={"origin": base}, timeout=30) as http:
        me = http.get("/dashboard/api/me").json()
        r = http.post(
            f"/dashboard/api/approvals/{ask_id}",
            json={"choice": choice},
            headers={"x-csrf-token": me["csrf"]},
        )
    return r.json()


def wait_for_pending(state: State, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = state.approvals.pending()
        if found:
            return found
        state.approvals.wait_for_change(0.5)
    raise AssertionError("no pending ask appeared")


def test_an_ask_raised_on_one_gateway_is_answered_from_another(pg_url, env_for):
    a, b = env_for(pg_url, "a"), env_for(pg_url, "b")
    elsewhere = State(pg_url)  # the other side's handle: what B's dashboard calls
    with (
        serve(a) as (url_a, proc_a),
        serve(b) as (url_b, proc_b),
        elsewhere.approvals.present("test-dashboard"),
    ):
        results: dict[str, str] = {}

        async def agent() -> None:
            async with Client(url_a + "?session=alpha&agent=agent-a") as c:
                r = await c.call_tool("read_file", {"path": "ask-me.txt"})
                results["text"], results["error"] = text(r), str(r.is_error)

        runner = threading.Thread(target=anyio.run, args=(agent,))
        runner.start()
        [ask] = wait_for_pending(elsewhere)
        assert ask.gateway.endswith(f":{proc_a.pid}") and ask.agent == "agent-a"
        assert ask.action["kind"] == "read" and "ask-me.txt" in ask.action["target"]
        first = answer_on_dashboard(url_b, ask.id, "once")  # B's own API, over HTTP
        second = State(pg_url).approvals.answer(ask.id, Answer("deny", "webhook", "bob"))
        runner.join(60)
        assert first["accepted"] and not second and "already answered" in second.message
        assert results["error"] == "False" and "the guarded content" in results["text"]

        # B shares the same truth: its agents see the same log and grants.
        async def agent_b() -> None:
            async with Client(url_b + "?session=beta") as c:
                await c.call_tool("write_file", {"path": "from-b.txt", "content": "b\n"})

        anyio.run(agent_b)
    calls = [e for e in elsewhere.audit.events(kind="call")]
    by_gateway = {e.tool: e.gateway for e in calls}
    assert by_gateway["read_file"].endswith(f":{proc_a.pid}")
    assert by_gateway["write_file"].endswith(f":{proc_b.pid}")
    [read] = [e for e in calls if e.tool == "read_file"]
    person = getpass.getuser()  # a browser on this machine needs no login on loopback
    assert read.decision == "allow" and read.approver == f"{person} via web"
    answers = [e for e in elsewhere.audit.events(kind="approval") if e.approver]
    assert [(e.approver, e.channel, e.result.split(":")[0]) for e in answers] == [
        (person, "web", "accepted"),
        ("bob", "webhook", "answer deny refused"),
    ]
    verified = run_cli("log", "verify", "--url", pg_url)
    assert verified.returncode == 0, verified.stdout


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_kill_9_loses_no_returned_call_and_expires_pending_asks(db, request, env_for, tmp_path):
    url = request.getfixturevalue("sqlite_url" if db == "sqlite" else "pg_url")
    env = env_for(url)
    port = free_port()
    done: list[str] = []  # calls whose result reached the agent
    stop = threading.Event()
    observer = State(url)

    async def writer(name: str, url_mcp: str) -> None:
        try:
            async with Client(f"{url_mcp}?session={name}") as c:
                for n in range(10_000):
                    if stop.is_set():
                        return
                    path = f"{name}-{n}.txt"
                    r = await c.call_tool("write_file", {"path": path, "content": "x"})
                    assert not r.is_error, text(r)
                    done.append(path)
        except Exception:  # the gateway died under us
            return

    async def asker(url_mcp: str) -> None:
        try:
            async with Client(f"{url_mcp}?session=asker") as c:
                await c.call_tool("read_file", {"path": "ask-me.txt"})
        except Exception:
            return

    with observer.approvals.present("test-dashboard"), serve(env, port=port) as (url_mcp, proc):

        def clients() -> None:
            async def main() -> None:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(asker, url_mcp)
                    for i in range(3):
                        tg.start_soon(writer, f"w{i}", url_mcp)

            anyio.run(main)

        runner = threading.Thread(target=clients)
        runner.start()
        [ask] = wait_for_pending(observer)
        deadline = time.monotonic() + 60
        while len(done) < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)  # mid-flight: three writers are calling
        proc.wait(10)
        stop.set()
        runner.join(60)
    returned = list(done)
    assert len(returned) >= 30
    assert observer.approvals.get(ask.id).status == "pending"  # nobody has looked yet

    with serve(env, port=port):  # the restarted gateway cleans up at start
        expired = observer.approvals.get(ask.id)
        assert expired.status == "expired" and expired.outcome.startswith("denied")
        refused = observer.approvals.answer(ask.id, Answer("once", "web", "alice"))
        assert not refused and "stopped" in refused.message
    verified = run_cli("log", "verify", "--url", url)
    assert verified.returncode == 0, verified.stdout
    logged = [
        json.loads(line)["arguments"]["path"]
        for line in run_cli(
            "log", "--url", url, "--json", "--kind", "call", "--limit", "100000"
        ).stdout.splitlines()
        if json.loads(line)["tool"] == "write_file"
    ]
    assert set(returned) <= set(logged)
    assert len(logged) == len(set(logged))  # each call exactly once
    assert not [
        e
        for e in observer.audit.events(kind="call")
        if e.tool == "read_file" and e.decision == "allow"
    ]  # the pending ask was never approved
