"""Asks raised outside MCP under load (issue 15): do other callers keep their speed?

    python benchmarks/pending_asks.py [N]     (N pending asks, default 100)

1. Network asks: a gateway with ``sandbox.network: proxy`` and bwrap sandboxes; N
   sandboxed commands (10 sessions of one client, over the real MCP client) each wait for
   a person to approve their destination through the session's egress proxy. Another
   client's session then calls ``read_file`` and fetches an allowed loopback server
   through its own proxy. Prints medians unloaded and loaded, and the ratio.
2. Exec asks: ``agentvisor serve`` as a process and N ``agentvisor exec`` CLIs asking at
   once (a person present on the shared queue, who does not answer); a second ``agentvisor
   exec -- true`` is timed unloaded and loaded. Prints how many asks wait (the cap is 64
   per client) and how many were refused over it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
from mcp.client import Client

from agentvisor.config import config_from_dict
from agentvisor.frontends.mcpserver import build_server
from agentvisor.gateway import Gateway, Session
from agentvisor.state import State

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
CLI = str(Path(sys.executable).with_name("agentvisor"))
GET = (
    'python3 -c "import sys, urllib.request as u, urllib.error as e\n'
    "try: print(u.urlopen(sys.argv[1], timeout=300).status)\n"
    'except e.HTTPError as x: print(x.code)" '
)


class Silent:
    """An approval channel with a person who never answers."""

    name = "silent"
    where = "nowhere"

    def __init__(self) -> None:
        self.asked = 0

    def available(self) -> bool:
        return True

    def ask(self, request: Any, submit: Any) -> None:
        self.asked += 1

    def cancel(self, request: Any, outcome: str) -> None:
        pass


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"ok")


async def median_call(c: Client, tool: str, arguments: dict[str, Any], runs: int) -> float:
    took = []
    for _ in range(runs):
        start = time.perf_counter()
        await c.call_tool(tool, arguments)
        took.append(time.perf_counter() - start)
    return statistics.median(took)


def network_asks(tmp: Path) -> None:
    server = ThreadingHTTPServer(("127.0.0.2", 0), _Ok)  # 127.0.0.1 is the sandbox's own
    threading.Thread(target=server.serve_forever, daemon=True).start()
    allowed = f"127.0.0.2:{server.server_address[1]}"
    ws = tmp / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello\n")
    config = config_from_dict(
        {
            "audit": {"url": f"sqlite:///{tmp / 'state.db'}"},
            "approvals": {
                "timeout": 300,
                "max_pending_per_session": N,
                "max_pending_per_client": N,
            },
            "gateway": {"max_calls_per_client": 2 * N},
            "sandbox": {"network": "proxy", "timeout": 300},
            "rules": [
                {"decision": "allow", "kind": "fetch", "pattern": allowed},
                {"decision": "ask", "kind": "fetch", "pattern": "asked.example.test"},
            ],
        }
    )
    gw = Gateway(config, workspace=ws)
    silent = Silent()
    gw.broker.channels = [silent]
    agents = [gw.open_session(toolsets=["all"], client="agent-a") for _ in range(10)]
    other = gw.open_session(toolsets=["all"], client="agent-b")

    def client(session: Session) -> Client:
        return Client(build_server(gw, lambda ctx: session))

    async def main() -> None:
        read = ("read_file", {"path": "notes.txt"})
        fetch = ("terminal", {"command": f"{GET}http://{allowed}/"})
        async with client(other) as o, contextlib.AsyncExitStack() as stack:
            await median_call(o, *read, runs=5)
            figures = {"read_file": [await median_call(o, *read, runs=15)]}
            figures["proxied fetch"] = [await median_call(o, *fetch, runs=5)]
            clients = [await stack.enter_async_context(client(s)) for s in agents]
            async with anyio.create_task_group() as tg:
                for n in range(N):
                    asked = {"command": f"{GET}http://asked.example.test/"}
                    tg.start_soon(clients[n % 10].call_tool, "terminal", asked)
                deadline = time.monotonic() + 120
                while gw.asks.count() < N and time.monotonic() < deadline:
                    await anyio.sleep(0.1)
                print(f"network asks pending: {gw.asks.count()} of {N}")
                with anyio.move_on_after(120) as scope:
                    figures["read_file"].append(await median_call(o, *read, runs=15))
                    figures["proxied fetch"].append(await median_call(o, *fetch, runs=5))
                if scope.cancelled_caught:
                    print("  the other session's calls did not finish within 120 s")
                gw.asks.withdraw("the benchmark is over")
        for name, (unloaded, loaded) in figures.items():
            print(
                f"  {name:14} unloaded {unloaded * 1000:7.1f} ms   {N} asks pending "
                f"{loaded * 1000:7.1f} ms   ratio {loaded / unloaded:.2f}"
            )

    try:
        anyio.run(main)
    finally:
        gw.close()
        server.shutdown()


def exec_asks(tmp: Path) -> None:
    env = dict(os.environ, HOME=str(tmp / "home"), XDG_RUNTIME_DIR=str(tmp / "run"))
    env.pop("AGENTVISOR_NO_GATEWAY", None)
    url = f"sqlite:///{tmp / 'exec-state.db'}"
    config = tmp / "home" / ".config" / "agentvisor" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(f"approvals: {{timeout: 300}}\naudit: {{url: '{url}'}}\n")
    ws = tmp / "exec-ws"
    ws.mkdir()
    queue = State(url).approvals
    stop = threading.Event()

    def person_present() -> None:
        with queue.present("benchmark"):
            stop.wait(600)

    threading.Thread(target=person_present, daemon=True).start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    serve = subprocess.Popen(
        [CLI, "serve", "--port", str(port), "--workspace", str(ws)],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    sock = tmp / "run" / "agentvisor" / "exec.sock"
    while not sock.exists():
        time.sleep(0.1)

    def start(command: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [CLI, "exec", "--", "sh", "-c", command],
            env=env,
            cwd=ws,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def median_exec() -> float:
        return statistics.median(_timed(lambda: start("true").wait()) for _ in range(9))

    started: list[subprocess.Popen[bytes]] = []
    try:
        median_exec()
        unloaded = median_exec()
        started = [start("sudo -n true") for _ in range(N)]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if len(queue.pending()) + sum(p.poll() is not None for p in started) >= N:
                break
            time.sleep(0.2)
        loaded = median_exec()
        refused = sum(p.poll() is not None for p in started)
        print(f"exec asks pending: {len(queue.pending())} of {N}, refused over the cap {refused}")
        print(
            f"  exec -- true   unloaded {unloaded * 1000:7.1f} ms   asks pending "
            f"{loaded * 1000:7.1f} ms   ratio {loaded / unloaded:.2f}"
        )
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
        stop.set()
        serve.terminate()
        serve.wait(15)


def _timed(run: Callable[[], object]) -> float:
    begin = time.perf_counter()
    run()
    return time.perf_counter() - begin


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as directory:
        os.environ["HOME"] = directory  # the gateway's state and grants stay in here
        network_asks(Path(directory))
        exec_asks(Path(directory))
