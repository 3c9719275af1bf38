"""The gateway pipeline in-process: approvals through a channel, audit, shaping, modes.

The pipeline's plumbing runs against `FakeBackend` (a scripted command result); what needs
an isolated process (state kept or not between calls) runs in a real bwrap sandbox.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

import anyio
import pytest
from mcp.client import Client

from agentvisor.approvals import ApprovalBroker
from agentvisor.config import config_from_dict
from agentvisor.frontends.mcpserver import build_server
from agentvisor.gateway import Gateway
from agentvisor.sandbox import Result, Sandbox
from agentvisor.sandbox.fake import FakeBackend
from agentvisor.state.asks import Answer
from tests.conftest import requires_bwrap

if TYPE_CHECKING:
    from agentvisor.state.asks import Choice
from tests.gateway.conftest import text


def scripted(outputs: dict[str, bytes]) -> FakeBackend:
    """A backend whose `bash -c COMMAND` prints ``outputs[COMMAND]`` and exits 0."""
    return FakeBackend(lambda argv: Result(exit_code=0, stdout=outputs[argv[-1]], stderr=b""))


class ScriptedChannel:
    """An approval channel that answers every ask the way the test says, and records it."""

    name = "test"

    def __init__(self, choice: Choice, reason: str = "") -> None:
        self.choice, self.reason = choice, reason
        self.asked: list[str] = []

    def available(self) -> bool:
        return True

    def ask(self, request, submit) -> None:
        self.asked.append(request.action.target)
        threading.Thread(
            target=submit, args=(Answer(self.choice, self.name, "tester", self.reason),)
        ).start()

    def cancel(self, request, outcome) -> None:
        pass


def make_gateway(workspace, tmp_path, channel=None, backend=None, **config) -> Gateway:
    """A gateway on ``backend`` (default: a fake that runs nothing), or on the configured
    real backend with ``backend="real"``. Its state (redacting audit log) is in tmp_path."""
    audit = {"url": f"sqlite:///{tmp_path / 'audit.db'}"}
    cfg = config_from_dict({"approvals": {"timeout": 5}, "audit": audit, **config})
    broker = ApprovalBroker(cfg, channels=[channel] if channel else [], grants=None)
    sandbox = None
    if backend != "real":
        sandbox = Sandbox(cfg, workspace=workspace, backend=backend or scripted({}))
    return Gateway(cfg, workspace=workspace, broker=broker, sandbox=sandbox)


def call_over_mcp(gateway: Gateway, tool: str, arguments: dict):
    session = gateway.open_session(agent="test-agent", toolsets=["all"])
    server = build_server(gateway, lambda ctx: session)

    async def main():
        async with Client(server) as client:
            return await client.call_tool(tool, arguments)

    return anyio.run(main)


def test_an_ask_approved_by_a_channel_runs(workspace, tmp_path, isolated_home):
    channel = ScriptedChannel("once")
    backend = scripted({"sudo -n true; echo ran": b"ran\n"})
    gateway = make_gateway(workspace, tmp_path, channel, backend)
    try:
        result = call_over_mcp(gateway, "terminal", {"command": "sudo -n true; echo ran"})
        assert "ran" in text(result)
        assert channel.asked == ["sudo -n true; echo ran"]
        assert backend.calls[-1][-1] == "sudo -n true; echo ran"
        events = [e for e in gateway.audit.events() if e.kind == "call"]
        assert events[-1].decision == "allow" and "tester" in (events[-1].approver or "")
    finally:
        gateway.close()


def test_an_ask_denied_with_a_reason_shows_the_reason(workspace, tmp_path, isolated_home):
    backend = scripted({})
    gateway = make_gateway(workspace, tmp_path, ScriptedChannel("deny", "not on a Friday"), backend)
    try:
        result = call_over_mcp(gateway, "terminal", {"command": "sudo -n true; echo ran"})
        assert result.is_error and "not on a Friday" in text(result)
        assert "[exit" not in text(result) and backend.calls == []
    finally:
        gateway.close()


def test_nobody_to_ask_means_deny(workspace, tmp_path, isolated_home):
    backend = scripted({})
    gateway = make_gateway(workspace, tmp_path, backend=backend)
    try:
        result = call_over_mcp(gateway, "terminal", {"command": "sudo -n true; echo ran"})
        assert result.is_error and "Refused" in text(result) and "[exit" not in text(result)
        assert backend.calls == []
    finally:
        gateway.close()


def test_every_call_is_audited_with_redacted_arguments(
    workspace, tmp_path, isolated_home, monkeypatch
):
    monkeypatch.setenv("DEMO_TOKEN", "tok-1234567890abcdef")
    gateway = make_gateway(
        workspace,
        tmp_path,
        backend=scripted({"echo tok-1234567890abcdef": b"tok-1234567890abcdef\n"}),
        secrets=[{"name": "DEMO_TOKEN", "env": "DEMO_TOKEN", "hosts": ["api.example.com"]}],
    )
    try:
        session = gateway.open_session(toolsets=["all"])
        out = gateway.call(session, "terminal", {"command": "echo tok-1234567890abcdef"})
        assert "tok-1234567890abcdef" not in out.text and "{{secret:DEMO_TOKEN}}" in out.text
        gateway.call(session, "read_file", {"path": "missing.txt"})
        calls = [e for e in gateway.audit.events(session=session.id) if e.kind == "call"]
        assert [e.tool for e in calls] == ["terminal", "read_file"]
        assert "tok-1234567890abcdef" not in str(calls[0].arguments)
    finally:
        gateway.close()


def test_output_is_capped_and_escapes_stripped(workspace, tmp_path, isolated_home):
    command = "printf '\\033[31mred\\033[0m\\n'; seq 1 5000"
    printed = b"\x1b[31mred\x1b[0m\n" + b"".join(b"%d\n" % n for n in range(1, 5001))
    gateway = make_gateway(
        workspace,
        tmp_path,
        backend=scripted({command: printed}),
        gateway={"max_output_bytes": 2000},
    )
    try:
        session = gateway.open_session(toolsets=["terminal"])
        out = gateway.call(session, "terminal", {"command": command})
        assert "\x1b" not in out.text and "red" in out.text
        assert "bytes of output cut" in out.text and len(out.text) < 2300
        assert out.text.rstrip().endswith("]") and "5000" in out.text  # the tail is kept
    finally:
        gateway.close()


@requires_bwrap
def test_fresh_sandbox_per_call_when_not_persistent(workspace, tmp_path, isolated_home):
    gateway = make_gateway(workspace, tmp_path, backend="real", sandbox={"persistent": False})
    try:
        session = gateway.open_session(toolsets=["terminal"])
        gateway.call(session, "terminal", {"command": "echo x > /tmp/state"})
        out = gateway.call(session, "terminal", {"command": "cat /tmp/state"})
        assert "No such file" in out.text
        out = gateway.call(session, "terminal", {"command": "sleep 1", "background": True})
        assert out.is_error and "persistent" in out.text
    finally:
        gateway.close()


def test_invalid_arguments_are_refused_clearly(workspace, tmp_path, isolated_home):
    gateway = make_gateway(workspace, tmp_path)
    try:
        session = gateway.open_session(toolsets=["all"])
        out = gateway.call(session, "terminal", {"cmd": "ls"})
        assert out.is_error and "invalid arguments" in out.text
        out = gateway.call(session, "no_such_tool", {})
        assert out.is_error and "not available" in out.text
    finally:
        gateway.close()


@pytest.mark.parametrize(
    "toolset, expected",
    [
        ("file", {"read_file", "write_file", "patch", "search_files"}),
        ("terminal", {"terminal", "process", "execute_code"}),
        ("http", {"http_request"}),
        (
            "debugging",
            {
                "terminal",
                "process",
                "execute_code",
                "read_file",
                "write_file",
                "patch",
                "search_files",
                "web_extract",
                "web_search",
            },
        ),
    ],
)
def test_toolsets(workspace, tmp_path, isolated_home, toolset, expected):
    gateway = make_gateway(workspace, tmp_path)
    try:
        assert set(gateway.open_session(toolsets=[toolset]).tools) == expected
    finally:
        gateway.close()


# In a fresh process, so its peak RSS is this call's alone.
HUGE_OUTPUT = """
import resource, sys
from agentvisor.state.events import SQLiteAuditLog
from agentvisor.config import config_from_dict
from agentvisor.gateway import Gateway
cfg = config_from_dict({"sandbox": {"persistent": False}})
gateway = Gateway(cfg, workspace=sys.argv[1], audit=SQLiteAuditLog(sys.argv[2]))
session = gateway.open_session(toolsets=["terminal"])
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
out = gateway.call(session, "terminal", {"command": "head -c 200000000 /dev/zero | tr '\\\\0' a"})
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
gateway.close()
print((after - before) // 1024, "bytes of output cut" in out.text, len(out.text))
"""


@requires_bwrap
def test_huge_output_keeps_the_gateway_small_without_a_persistent_sandbox(
    workspace, tmp_path, isolated_home
):
    import subprocess
    import sys

    probe = subprocess.run(
        [sys.executable, "-c", HUGE_OUTPUT, str(workspace), str(tmp_path / "audit.db")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    growth_mb, cut, length = probe.stdout.split()
    # Control: 200 MB really came out (the shaped result says how much was cut).
    assert cut == "True" and int(length) < 100_000, probe
    assert int(growth_mb) < 64, probe  # the gateway held a bounded head and tail only
