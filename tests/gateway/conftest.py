"""Fixtures for end-to-end gateway tests: a workspace, a config, and MCP clients."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import AGENTVISOR

BASE_CONFIG = """
sandbox:
  timeout: 30
approvals:
  timeout: 5
"""


@pytest.fixture
def gw_env(tmp_path, isolated_home):
    """Workspace, config file and environment for a gateway started as a subprocess."""
    ws = tmp_path / "ws"
    ws.mkdir()
    config = tmp_path / "agentvisor.yaml"
    config.write_text(BASE_CONFIG)
    env = dict(os.environ, HOME=str(isolated_home))
    return {"ws": ws, "config": config, "env": env, "home": isolated_home}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(gw_env, *extra: str, port: int | None = None):
    port = port or free_port()
    proc = subprocess.Popen(
        [
            AGENTVISOR,
            "serve",
            "--config",
            str(gw_env["config"]),
            "--workspace",
            str(gw_env["ws"]),
            "--port",
            str(port),
            *extra,
        ],
        env=gw_env["env"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"serve exited: {proc.communicate()[1]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            break
        time.sleep(0.1)
    try:
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


def stdio_params(gw_env, *extra: str):
    from mcp.client.stdio import StdioServerParameters

    return StdioServerParameters(
        command=AGENTVISOR,
        args=["mcp", "--config", str(gw_env["config"]), "--workspace", str(gw_env["ws"]), *extra],
        env=gw_env["env"],
        cwd=str(gw_env["ws"]),
    )


def text(result) -> str:
    return "".join(c.text for c in result.content if getattr(c, "text", None))


def corpus_paths(shared: Path) -> list[tuple[str, str]]:
    rows = []
    for line in (shared / "paths-escape.tsv").read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        op, path = line.split("\t")[:2]
        rows.append((op, path))
    return rows
