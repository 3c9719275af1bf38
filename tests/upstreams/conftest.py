"""Fixtures for upstream MCP servers: real third-party ones from npm and PyPI, and ours."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentvisor.approvals import ApprovalBroker
from agentvisor.config import config_from_dict
from agentvisor.gateway import Gateway
from agentvisor.state.events import SQLiteAuditLog
from agentvisor.upstreams import PinStore, Upstreams
from tests.conftest import REPO

HERE = Path(__file__).resolve().parent
# The interpreter of this virtualenv and the installation it was made from: what a
# Python server needs to see inside the sandbox (the home directory is a tmpfs there).
PYTHON_MOUNTS = sorted({sys.prefix, sys.base_prefix})
FS_MAIN = (
    REPO / "build/upstream-servers/node_modules/@modelcontextprotocol/server-filesystem"
    "/dist/index.js"
)


@pytest.fixture(scope="session")
def fs_server() -> Path:
    """The reference filesystem server from npm, installed at its pinned version."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("node and npm are needed for the npm filesystem server")
    subprocess.run([str(REPO / "scripts/install-upstream-servers.sh")], check=True)
    return FS_MAIN


def ro_mounts(*paths: str | Path) -> list[str]:
    return [f"{p}:{p}:ro" for p in paths]


def python_server(name: str, *argv: str, **extra) -> dict:
    return {
        "name": name,
        "command": [sys.executable, *argv],
        "mounts": ro_mounts(*PYTHON_MOUNTS, *extra.pop("mounts", [])),
        **extra,
    }


def probe_server(description_file: Path, name: str = "probe") -> dict:
    return python_server(
        name,
        str(HERE / "probe_server.py"),
        str(description_file),
        mounts=[HERE, description_file.parent],
    )


class ScriptedChannel:
    """Answers every ask with one choice, and remembers what was asked."""

    name = "test"

    def __init__(self, choice: str) -> None:
        self.choice = choice
        self.asked: list[tuple[str, str]] = []

    def available(self) -> bool:
        return True

    def ask(self, request, submit) -> None:
        from agentvisor.approvals.channel import Answer

        self.asked.append((request.action.target, request.decision.reason))
        submit(Answer(self.choice, self.name, "tester", ""))

    def cancel(self, request, outcome) -> None:
        pass


@contextlib.contextmanager
def upstream_gateway(
    workspace: Path,
    tmp_path: Path,
    servers: list[dict],
    *,
    rules: list[dict] | None = None,
    channel: ScriptedChannel | None = None,
    pins: PinStore | None = None,
    **config,
) -> Iterator[tuple[Gateway, Upstreams]]:
    cfg = config_from_dict(
        {
            "approvals": {"timeout": 5},
            "toolsets": ["all"],
            "rules": [{"decision": "allow", "kind": "tool", "pattern": "*__*"}]
            if rules is None
            else rules,
            "upstreams": servers,
            **config,
        }
    )
    broker = ApprovalBroker(cfg, channels=[channel] if channel else [], grants=None)
    gateway = Gateway(
        cfg, workspace=workspace, broker=broker, audit=SQLiteAuditLog(tmp_path / "audit.db")
    )
    store = pins or PinStore(tmp_path / "pins.json")
    upstreams = Upstreams.attach(gateway, cfg.upstreams, pins=store)
    try:
        yield gateway, upstreams
    finally:
        gateway.close()
        upstreams.close()
