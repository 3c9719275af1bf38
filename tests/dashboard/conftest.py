"""Fixtures for the dashboard and webhook tests: a real `agentvisor serve`, agents calling
it over MCP (the SDK client), Debian's headless Chromium driven by Playwright, and webhook
targets that are HTTP servers on loopback."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import AGENTVISOR, REPO

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SHOTS = REPO / "screenshots"
WEBHOOK_SECRET = "test-webhook-secret-0123456789"

BASE_CONFIG = """
sandbox:
  timeout: 30
approvals:
  timeout: 60
rules:
  - {decision: ask, kind: exec, pattern: "echo approve-me *"}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate: Any, timeout: float = 20.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@dataclass
class Gateway:
    base: str  # http://127.0.0.1:PORT
    proc: subprocess.Popen
    env: dict[str, Any]

    @property
    def mcp(self) -> str:
        return self.base + "/mcp"

    @property
    def dashboard(self) -> str:
        return self.base + "/dashboard/"

    def api(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(self.base + "/dashboard/api" + path, timeout=10, **kw)

    def post(self, path: str, body: Any, **kw: Any) -> httpx.Response:
        """A POST the way the page sends it (loopback, no login: the page's CSRF token)."""
        csrf = self.api("/me").json()["csrf"]
        headers = {"x-csrf-token": csrf, "origin": self.base, **kw.pop("headers", {})}
        return httpx.post(
            self.base + "/dashboard/api" + path, json=body, headers=headers, timeout=10, **kw
        )

    def pending(self) -> list[dict[str, Any]]:
        return self.api("/approvals").json()["pending"]

    def audit(self, **params: Any) -> list[dict[str, Any]]:
        return self.api("/audit", params=params).json()["events"]


@pytest.fixture
def dash_env(tmp_path: Path, isolated_home: Path) -> dict[str, Any]:
    ws = tmp_path / "ws"
    ws.mkdir()
    config = tmp_path / "agentvisor.yaml"
    config.write_text(BASE_CONFIG)
    env = dict(os.environ, HOME=str(isolated_home))
    env.pop("AGENTVISOR_DASHBOARD_TOKEN", None)
    return {"ws": ws, "config": config, "env": env, "tmp": tmp_path}


@contextlib.contextmanager
def serve(env: dict[str, Any], *extra: str, host: str = "127.0.0.1") -> Iterator[Gateway]:
    port = free_port()
    log = open(env["tmp"] / f"serve-{port}.log", "w+")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen(
        [
            AGENTVISOR,
            "serve",
            "--config",
            str(env["config"]),
            "--workspace",
            str(env["ws"]),
            "--host",
            host,
            "--port",
            str(port),
            *extra,
        ],
        env=env["env"],
        cwd=env["tmp"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"serve exited: {log.read()}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("serve did not start")
            time.sleep(0.1)
        yield Gateway(f"http://127.0.0.1:{port}", proc, env)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


class Agent:
    """One agent session (an MCP client) making calls in order, in its own thread."""

    def __init__(
        self, url: str, calls: list[tuple[str, dict[str, Any]]], agent: str = "test-agent"
    ) -> None:
        self.url = url
        self.calls = calls
        self.results: list[tuple[bool, str]] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(agent,), daemon=True)
        self._thread.start()

    def _run(self, agent: str) -> None:
        import anyio
        import httpx2
        from mcp.client import Client
        from mcp.client.streamable_http import streamable_http_client

        async def main() -> None:
            client = httpx2.AsyncClient(timeout=120)
            async with Client(
                streamable_http_client(f"{self.url}?agent={agent}", http_client=client),
                mode="legacy",
            ) as c:
                for tool, args in self.calls:
                    r = await c.call_tool(tool, args)
                    text = "".join(getattr(p, "text", None) or "" for p in r.content)
                    self.results.append((bool(r.is_error), text))

        try:
            anyio.run(main)
        except BaseException as exc:  # reported by wait()
            self.error = exc

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self, timeout: float = 90) -> list[tuple[bool, str]]:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the agent's calls did not return"
        if self.error is not None:
            raise self.error
        return self.results


def one_call(url: str, command: str, agent: str = "test-agent") -> Agent:
    return Agent(url, [("terminal", {"command": command})], agent)


def pending_for(
    gw: Gateway, text: str, timeout: float = 30, agent: Agent | None = None
) -> dict[str, Any]:
    def find() -> dict[str, Any] | None:
        if agent is not None and agent.done:
            raise AssertionError(
                f"the agent's call ended without asking: {agent.error!r} {agent.results}"
            )
        return next((a for a in gw.pending() if text in a["action"]["target"]), None)

    return wait_for(find, timeout, f"a pending ask for {text!r}")


# -- the browser ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing (Debian's chromium package; make test installs it)")
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert errors == [], f"JavaScript errors on the page: {errors}"


def screenshot(page: Any, name: str) -> Path:
    """Write screenshots/dashboard-NAME.png (the main views, for people to look at)."""
    SHOTS.mkdir(exist_ok=True)
    path = SHOTS / f"dashboard-{name}.png"
    page.evaluate("window.scrollTo(0, 0); document.getElementById('toasts')?.replaceChildren()")
    page.screenshot(path=str(path), full_page=True, animations="disabled")
    return path


# -- webhook targets --------------------------------------------------------------------


@dataclass
class Receiver:
    """An HTTP server on loopback that records what the gateway POSTs to it."""

    url: str
    messages: list[tuple[dict[str, str], bytes]] = field(default_factory=list)

    def payloads(self, kind: str | None = None) -> list[dict[str, Any]]:
        out = [json.loads(body) for _, body in list(self.messages)]
        return [m for m in out if kind is None or m["type"] == kind]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    recorded: list[tuple[dict[str, str], bytes]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            recorded.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield Receiver(f"http://127.0.0.1:{server.server_address[1]}/hook", recorded)
    server.shutdown()
    server.server_close()


def webhook_config(receiver: Receiver, approvers: tuple[str, ...] = ("alice@example.com",)) -> str:
    return (
        BASE_CONFIG + "webhooks:\n"
        f"  targets: [{receiver.url}]\n"
        "  secret_env: TEST_WEBHOOK_SECRET\n"
        f"  approvers: [{', '.join(approvers)}]\n"
        "  max_age: 60\n"
    )
