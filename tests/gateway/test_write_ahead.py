"""Write-ahead audit: nothing runs that the audit log has not recorded.

The state database and the agent's workspace share one small disk (a tmpfs mounted for
the test), as when an agent's workspace and the state directory share a partition. The
agent fills the disk from inside its sandbox; its next commands and file writes must be
refused without running, because their intent cannot be written first.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client import Client

from agentvisor.approvals import ApprovalBroker
from agentvisor.config import config_from_dict
from agentvisor.frontends.mcpserver import build_server
from agentvisor.gateway import Gateway
from agentvisor.state import AuditStore
from tests.conftest import requires_bwrap
from tests.gateway.conftest import text

pytestmark = requires_bwrap


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs: the workspace and the state database on one disk that can fill up."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m,mode=0755", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


class Agent:
    """One MCP session over the real MCP client, its calls made one at a time."""

    def __init__(self, gateway: Gateway) -> None:
        self.session = gateway.open_session(agent="filler", toolsets=["all"])
        self.server = build_server(gateway, lambda ctx: self.session)

    def call(self, tool: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        """(is it an error, its text); a protocol-level error counts as an error too."""

        async def main() -> tuple[bool, str]:
            async with Client(self.server) as client:
                result = await client.call_tool(tool, arguments)
                return bool(result.is_error), text(result)

        try:
            return anyio.run(main)
        except Exception as exc:
            return True, repr(exc)


@contextlib.contextmanager
def gateway_on(disk: Path) -> Iterator[tuple[Gateway, Path]]:
    workspace = disk / "ws"
    workspace.mkdir()
    url = f"sqlite:///{disk / 'state' / 'state.db'}"
    # Direct writes: the agent's file lands on the disk it shares with the audit database
    # (with a changeset it would first land in agentvisor's own state directory).
    config = config_from_dict(
        {"audit": {"url": url}, "approvals": {"timeout": 5}, "workspace": {"mode": "direct"}}
    )
    broker = ApprovalBroker(config, channels=[], grants=None)
    gateway = Gateway(config, workspace=workspace, broker=broker)
    try:
        yield gateway, workspace
    finally:
        with contextlib.suppress(FileNotFoundError):
            (workspace / "fill").unlink()  # room for the lifecycle events of closing
        gateway.close()


def intents(store: AuditStore) -> list[str]:
    return [
        str((e.arguments or {}).get("command") or (e.arguments or {}).get("path"))
        for e in store.events(kind="intent")
    ]


def test_a_full_state_disk_refuses_calls_instead_of_running_them_unrecorded(
    small_disk: Path, isolated_home: Path
) -> None:
    with gateway_on(small_disk) as (gateway, workspace):
        agent = Agent(gateway)
        store = gateway.state.audit

        # Control: with room on the disk, both tools run and are recorded before running.
        assert agent.call("terminal", {"command": "echo before > before-terminal"})[0] is False
        assert agent.call("write_file", {"path": "before-write", "content": "x"})[0] is False
        assert (workspace / "before-terminal").exists() and (workspace / "before-write").exists()
        assert intents(store) == ["echo before > before-terminal", "before-write"]

        # The agent fills the shared disk from inside its sandbox.
        agent.call("terminal", {"command": "cat /dev/zero > fill; df -k . | tail -1"})
        assert (workspace / "fill").stat().st_size > 1_000_000

        for tool, arguments, made in (
            ("terminal", {"command": "touch ran-unrecorded"}, "ran-unrecorded"),
            ("write_file", {"path": "written-unrecorded", "content": "x"}, "written-unrecorded"),
        ):
            is_error, said = agent.call(tool, arguments)
            assert not (workspace / made).exists(), f"{tool} ran although it was not recorded"
            assert is_error and "nothing ran" in said and "audit log" in said, said
            assert str(small_disk) not in said  # the refusal names no host path

        # Room again: the same calls run, each recorded before it ran.
        (workspace / "fill").unlink()
        assert agent.call("terminal", {"command": "touch ran-recorded"})[0] is False
        assert agent.call("write_file", {"path": "written-recorded", "content": "x"})[0] is False
        assert (workspace / "ran-recorded").exists() and (workspace / "written-recorded").exists()
        recorded = intents(store)
        assert "touch ran-recorded" in recorded and "written-recorded" in recorded
        assert "touch ran-unrecorded" not in recorded
        assert "written-unrecorded" not in recorded
        assert store.verify().ok
