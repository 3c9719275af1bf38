"""Abandoned sessions are reclaimed: the sandbox soon (``sandbox.idle_stop``), the whole
session at ``sandbox.idle_timeout``, and the gateway's memory and descriptors come back.

Real parts: `agentvisor serve` as a process, the MCP SDK client over HTTP, bwrap
sandboxes. A client that goes away without a DELETE (``terminate_on_close=False``) is
what an agent killed mid-session looks like to the gateway.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client

from agentvisor.state import State
from tests.conftest import AGENTVISOR, requires_bwrap
from tests.gateway.conftest import free_port, text

pytestmark = requires_bwrap

# A leak of ~75 KB per abandoned session (issue 15) is 22 MB over 300; what the allocator
# keeps past its high-water mark after a reclaimed round measured 0.5–4 MB here (pymalloc
# arenas and glibc heaps keep freed memory for reuse). The tolerance sits between the two.
RSS_TOLERANCE_KB = 8 * 1024
# The state database may hold one more pooled connection than at the baseline.
FD_TOLERANCE = 2


class Gateway:
    """`agentvisor serve` with short idle times, and what it holds as the kernel sees it."""

    def __init__(self, tmp: Path, *, idle_stop: float, idle_timeout: float) -> None:
        self.ws = tmp / "ws"
        self.ws.mkdir()
        (self.ws / "notes.txt").write_text("hello\n")
        self.state_url = f"sqlite:///{tmp / 'state.db'}"
        config = tmp / "agentvisor.yaml"
        config.write_text(
            f"audit:\n  url: {self.state_url}\n"
            f"sandbox:\n  idle_stop: {idle_stop}\n  idle_timeout: {idle_timeout}\n"
            # Every session here comes from one address: lift the per-client quotas.
            "gateway:\n  max_sessions_per_client: 1000\n  max_calls_per_client: 1000\n"
        )
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.stderr = (tmp / "serve.err").open("w")
        argv = ["serve", "--config", str(config), "--workspace", str(self.ws)]
        self.proc = subprocess.Popen(
            [AGENTVISOR, *argv, "--port", str(self.port)],
            env=dict(os.environ),
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
        )

    def rss_kb(self) -> int:
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        return int(next(x for x in status.splitlines() if x.startswith("VmRSS")).split()[1])

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def sandboxes(self) -> list[str]:
        """The gateway's child processes: each is a session's sandbox (bwrap)."""
        found = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True)
        return found.stdout.split()

    def lifecycle(self) -> list[str]:
        return [
            e.result or "" for e in State(self.state_url).audit.events(kind="sandbox", limit=10**6)
        ]

    def wait_reclaimed(self, timeout: float) -> None:
        """Until every session opened so far is closed and no sandbox runs."""
        deadline = time.monotonic() + timeout
        while True:
            said = self.lifecycle()
            opened = sum(1 for r in said if r.startswith("session opened"))
            closed = said.count("session closed")
            if opened == closed and not self.sandboxes():
                return
            assert time.monotonic() < deadline, f"{opened - closed} sessions not reclaimed"
            time.sleep(0.5)


@contextlib.contextmanager
def gateway(tmp: Path, **idle: float) -> Iterator[Gateway]:
    gw = Gateway(tmp, **idle)
    try:
        deadline = time.monotonic() + 30
        while not _listening(gw.port):
            assert gw.proc.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.1)
        yield gw
    finally:
        gw.proc.terminate()
        try:
            gw.proc.wait(15)
        except subprocess.TimeoutExpired:
            gw.proc.kill()
        gw.stderr.close()


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
    except OSError:
        return False
    return True


async def abandon(url: str, calls: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """One agent that makes its calls and goes away without ending its session."""
    async with httpx2.AsyncClient(timeout=120) as http:
        transport = streamable_http_client(url, http_client=http, terminate_on_close=False)
        async with Client(transport, mode="legacy") as client:
            results = [await client.call_tool(tool, args) for tool, args in calls]
    errors = [text(r) for r in results if r.is_error]
    assert not errors, errors
    return [text(r) for r in results]


def abandon_many(url: str, n: int, *, terminal_every: int = 10) -> None:
    """``n`` agents, 20 at a time: most read a file, every tenth runs a command."""
    read = ("read_file", {"path": "notes.txt"})
    command = ("terminal", {"command": "echo hi"})

    async def main() -> None:
        limit = anyio.Semaphore(20)

        async def one(i: int) -> None:
            async with limit:
                await abandon(url, [command, read] if i % terminal_every == 0 else [read])

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)

    anyio.run(main)


def test_a_session_the_client_ends_is_reclaimed_at_once(
    tmp_path: Path, isolated_home: Path
) -> None:
    """Idle times far off: only the client's DELETE can end the session this soon."""
    with gateway(tmp_path, idle_stop=300, idle_timeout=600) as gw:

        async def main() -> None:
            async with httpx2.AsyncClient(timeout=60) as http:
                transport = streamable_http_client(gw.url, http_client=http)
                async with Client(transport, mode="legacy") as client:
                    await client.call_tool("terminal", {"command": "sleep 300 &"})
                    assert gw.sandboxes(), "control: the session's sandbox runs"

        anyio.run(main)
        deadline = time.monotonic() + 10
        while gw.sandboxes() or "session closed" not in gw.lifecycle():
            assert time.monotonic() < deadline, "the ended session was not reclaimed"
            time.sleep(0.1)


def test_an_abandoned_sessions_sandbox_stops_first_and_the_session_later(
    tmp_path: Path, isolated_home: Path
) -> None:
    with gateway(tmp_path, idle_stop=1, idle_timeout=8) as gw:
        said = anyio.run(abandon, gw.url, [("terminal", {"command": "echo kept > /tmp/f"})])
        assert "[exit 0" in said[0], said
        assert gw.sandboxes(), "control: the session's sandbox runs after its call"
        deadline = time.monotonic() + 15
        while gw.sandboxes():
            assert time.monotonic() < deadline, "the idle sandbox was not stopped"
            time.sleep(0.2)
        events = gw.lifecycle()
        assert any("sandbox.idle_stop" in r for r in events), events
        assert "session closed" not in events, "the session itself lives on"
        gw.wait_reclaimed(timeout=30)
        assert any("sandbox.idle_timeout" in r for r in gw.lifecycle())


def test_a_sandbox_with_a_background_job_is_not_stopped(
    tmp_path: Path, isolated_home: Path
) -> None:
    with gateway(tmp_path, idle_stop=1, idle_timeout=60) as gw:
        job = ("terminal", {"command": "sleep 300", "background": True})
        anyio.run(abandon, gw.url, [job])
        time.sleep(4)  # idle_stop four times over
        assert gw.sandboxes(), "a sandbox running a job is not idle"
        assert not any("sandbox.idle_stop" in r for r in gw.lifecycle())


def test_300_abandoned_sessions_give_back_memory_and_descriptors(
    tmp_path: Path, isolated_home: Path
) -> None:
    """The first round of 100 brings the allocator to its high-water mark: the baseline.
    After 300 more abandoned sessions are reclaimed, the gateway's RSS and descriptors are
    back to that baseline, within a tolerance measured (see RSS_TOLERANCE_KB)."""
    with gateway(tmp_path, idle_stop=2, idle_timeout=6) as gw:
        abandon_many(gw.url, 100)
        gw.wait_reclaimed(timeout=120)
        base_rss, base_fds = gw.rss_kb(), gw.fds()

        abandon_many(gw.url, 300)
        peak_fds = gw.fds()
        gw.wait_reclaimed(timeout=180)
        time.sleep(1)  # the last close's descriptors and threads wind down
        rss, fds = gw.rss_kb(), gw.fds()

    print(f"RSS {base_rss} -> {rss} kB, fds {base_fds} -> (peak {peak_fds}) -> {fds}")
    assert peak_fds > base_fds + 10, "control: open sessions hold descriptors the probe sees"
    assert fds <= base_fds + FD_TOLERANCE, (base_fds, fds)
    assert rss - base_rss <= RSS_TOLERANCE_KB, f"RSS grew {rss - base_rss} kB past the baseline"


def test_a_session_whose_sandbox_stopped_works_on_with_a_fresh_one(
    workspace: Path, tmp_path: Path, isolated_home: Path
) -> None:
    from agentvisor.config import config_from_dict
    from agentvisor.gateway import Gateway as Pipeline

    config = config_from_dict(
        {
            "audit": {"url": f"sqlite:///{tmp_path / 'state.db'}"},
            "sandbox": {"idle_stop": 0.5, "idle_timeout": 600},
        }
    )
    gw = Pipeline(config, workspace=workspace)
    try:
        session = gw.open_session(toolsets=["all"])
        gw.call(session, "terminal", {"command": "echo scratch > /tmp/f"})
        gw.call(session, "write_file", {"path": "kept.txt", "content": "kept\n"})
        assert session.sandbox_running, "control: the sandbox runs after a call"
        deadline = time.monotonic() + 15
        while session.sandbox_running:
            assert time.monotonic() < deadline, "the idle sandbox was not stopped"
            time.sleep(0.1)
        assert not session.closed
        out = gw.call(session, "terminal", {"command": "cat kept.txt; cat /tmp/f"})
        assert "kept" in out.text and "scratch" not in out.text, out.text
        assert "kept" in gw.call(session, "read_file", {"path": "kept.txt"}).text
    finally:
        gw.close()
