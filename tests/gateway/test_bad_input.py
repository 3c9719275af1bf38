"""Bad input that makes Python raise must come back as a tool error with a reason and an
audit event, never as a protocol error with a traceback or a host path (issue 16).

Each case goes through the real MCP client into a real gateway (bwrap sandbox, host file
guard, guarded HTTP client toward a real server on loopback)."""

from __future__ import annotations

import contextlib
import http.server
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from agentvisor.actions import Action
from agentvisor.approvals import ApprovalBroker
from agentvisor.config import config_from_dict
from agentvisor.frontends.mcpserver import build_server
from agentvisor.gateway import Gateway
from agentvisor.gateway.tools import ToolSpec
from tests.conftest import requires_bwrap
from tests.gateway.conftest import text

pytestmark = requires_bwrap


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = b"<html><body><p>odd charset</p></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=x-no-such-charset")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def odd_server() -> Iterator[str]:
    """A loopback server whose pages name a charset Python does not know."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def gateway(
    workspace: Path,
    tmp_path: Path,
    host: str = "",
    extra_tools: Sequence[ToolSpec] = (),
    **sections: Any,
) -> Iterator[Gateway]:
    rules = [{"decision": "allow", "kind": "fetch", "pattern": host}] if host else []
    rules.append({"decision": "allow", "kind": "tool", "pattern": "broken_*"})
    config = config_from_dict(
        {
            "audit": {"url": f"sqlite:///{tmp_path / 'state.db'}"},
            "approvals": {"timeout": 5},
            "rules": rules,
            **sections,
        }
    )
    gw = Gateway(
        config,
        workspace=workspace,
        broker=ApprovalBroker(config, channels=[], grants=None),
        extra_tools=extra_tools,
    )
    try:
        yield gw
    finally:
        gw.close()


def call(gw: Gateway, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
    """One call over the real MCP client: (is_error, text). A protocol error fails the test:
    the agent must get a tool result it can read."""
    session = gw.open_session(agent="prober", toolsets=["all"])
    server = build_server(gw, lambda ctx: session)

    async def main() -> tuple[bool, str]:
        async with Client(server) as client:
            result = await client.call_tool(tool, arguments)
            return bool(result.is_error), text(result)

    return anyio.run(main)


def assert_clean_error(gw: Gateway, said: str, tool: str, workspace: Path) -> None:
    assert "Traceback" not in said and 'File "' not in said, said
    for host_path in (str(workspace), sys.prefix, str(Path(__file__).parents[2])):
        assert host_path not in said, said
    [event] = [e for e in gw.state.audit.events(kind="call") if e.tool == tool][-1:]
    assert event.result and event.result.startswith("error: "), event
    assert said.splitlines()[0] in event.result, "the audit event says what went wrong"


def test_control_ordinary_calls_succeed(workspace: Path, tmp_path: Path) -> None:
    with gateway(workspace, tmp_path) as gw:
        assert call(gw, "write_file", {"path": "ok.txt", "content": "x"})[0] is False
        assert call(gw, "read_file", {"path": "ok.txt"})[0] is False
        is_error, said = call(gw, "terminal", {"command": "echo a b"})
        assert not is_error and said.startswith("a b\n[exit 0"), said


@pytest.mark.parametrize("tool", ["read_file", "write_file"])
def test_a_path_too_long_is_a_tool_error(workspace: Path, tmp_path: Path, tool: str) -> None:
    arguments = {"path": "a" * 10_000, "content": "x"} if tool == "write_file" else {}
    arguments.setdefault("path", "a" * 10_000)
    with gateway(workspace, tmp_path) as gw:
        is_error, said = call(gw, tool, arguments)
        assert is_error and "too long" in said.lower(), said
        assert_clean_error(gw, said, tool, workspace)


def test_a_nul_byte_in_a_command_is_a_tool_error(workspace: Path, tmp_path: Path) -> None:
    with gateway(workspace, tmp_path) as gw:
        is_error, said = call(gw, "terminal", {"command": "echo a\x00b"})
        assert is_error and "nul byte" in said.lower() and "gateway:nul-byte" in said, said
        assert_clean_error(gw, said, "terminal", workspace)


@pytest.mark.parametrize("tool", ["web_extract", "http_request"])
def test_an_unknown_charset_never_escapes_as_a_traceback(
    workspace: Path, tmp_path: Path, odd_server: str, tool: str
) -> None:
    with gateway(workspace, tmp_path, odd_server) as gw:
        is_error, said = call(gw, tool, {"url": f"http://{odd_server}/"})
        assert "Traceback" not in said and str(workspace) not in said, said
        if is_error:  # until the network layer decodes it (e.g. as UTF-8 with replacement)
            assert_clean_error(gw, said, tool, workspace)
        else:
            assert "odd charset" in said


def _broken(name: str, where: str, message: str) -> ToolSpec:
    """A tool that raises a plain Python error while judged or while running."""

    def fail(session: Any, arguments: dict[str, Any]) -> Any:
        raise RuntimeError(message)

    def actions(session: Any, arguments: dict[str, Any]) -> list[Action]:
        return fail(session, arguments) if where == "actions" else [Action("tool", name)]

    schema = {"type": "object", "properties": {}}
    return ToolSpec(name, "fails", schema, frozenset({"file"}), actions, fail)


def test_other_errors_are_tool_errors_with_host_paths_masked(
    workspace: Path, tmp_path: Path
) -> None:
    message = f"cannot open {workspace}/x.db (see https://example.com/a/b)"
    tools = [_broken("broken_run", "run", message), _broken("broken_judge", "actions", message)]
    with gateway(workspace, tmp_path, extra_tools=tools) as gw:
        is_error, said = call(gw, "broken_run", {})
        assert is_error and said.startswith("broken_run failed: cannot open <path>"), said
        assert "https://example.com/a/b" in said and "(RuntimeError)" in said
        assert_clean_error(gw, said, "broken_run", workspace)

        # Failing while judged: refused (fail closed), nothing recorded as started.
        is_error, said = call(gw, "broken_judge", {})
        assert is_error and said.startswith("broken_judge failed: cannot open <path>"), said
        assert_clean_error(gw, said, "broken_judge", workspace)
        [event] = [e for e in gw.state.audit.events(kind="call") if e.tool == "broken_judge"]
        assert event.decision == "deny" and event.rule == "gateway:judge-failed"
        assert not [e for e in gw.state.audit.events(kind="intent") if e.tool == "broken_judge"]


@pytest.mark.parametrize(
    "tool, arguments",
    [
        ("execute_code", {"code": "print('\ud800')"}),
        ("terminal", {"command": "echo \udcff"}),
        ("read_file", {"path": "\ud800.txt"}),
        ("write_file", {"path": "ok.txt", "content": "a\udfffb"}),
        ("http_request", {"method": "GET", "url": "http://x/", "headers": {"X": "\ud800"}}),
    ],
)
def test_a_lone_surrogate_is_refused_as_invalid_arguments(
    workspace: Path, tmp_path: Path, tool: str, arguments: dict[str, Any]
) -> None:
    """Issue 16, a new variant: JSON can write a lone surrogate (``"\\ud800"``), Python
    keeps it, and every encoder after it fails (an internal error, no audit event, for
    execute_code). It is refused up front, for every tool, naming the argument."""
    with gateway(workspace, tmp_path) as gw:
        is_error, said = call(gw, tool, arguments)
        assert is_error and "invalid arguments" in said and "lone surrogate" in said, said
        assert_clean_error(gw, said, tool, workspace)
        is_error, said = call(gw, "terminal", {"command": "echo \u00e9"})  # control
        assert not is_error and said.startswith("\u00e9\n[exit 0"), said


@pytest.mark.parametrize("tool", ["terminal", "execute_code"])
def test_a_timeout_past_the_operators_limit_is_cut_to_it(
    workspace: Path, tmp_path: Path, tool: str
) -> None:
    """Issue 16, new variants: a timeout of 1e308 ended the call with an OverflowError, and
    any timeout longer than sandbox.timeout let one command outlive the operator's limit."""
    work = {"terminal": {"command": "sleep 4; echo late"}, "execute_code": {}}[tool]
    work = work or {"code": "import time; time.sleep(4); print('late')"}
    with gateway(workspace, tmp_path, sandbox={"timeout": 1.5}) as gw:
        _, said = call(gw, tool, {**work, "timeout": 1e308})
        assert "timed out after 1.5 s" in said and "late" not in said, said
        _, said = call(gw, tool, {**work, "timeout": 0.5})  # control: shorter holds
        assert "timed out after 0.5 s" in said, said
