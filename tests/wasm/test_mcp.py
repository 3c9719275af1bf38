"""End to end: installed Wasm tools over MCP, through the gateway's pipeline."""

from __future__ import annotations

import os

import anyio
import pytest
from mcp.client import Client

from tests.conftest import requires_bwrap, run_cli
from tests.gateway.conftest import BASE_CONFIG, stdio_params, text

pytestmark = requires_bwrap  # the gateway builds the session's sandbox backend


@pytest.fixture
def gw_env(tmp_path, isolated_home):
    """As tests/gateway's: a workspace, a config file, and $HOME (so the state directory
    the CLI installs into is the one the gateway reads)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    config = tmp_path / "agentvisor.yaml"
    config.write_text(BASE_CONFIG)
    env = dict(os.environ, HOME=str(isolated_home))
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env.pop(var, None)
    return {"ws": ws, "config": config, "env": env, "home": isolated_home}


ALLOW_WASM = """
rules:
  - {decision: allow, kind: tool, pattern: "wasm_*"}
"""


def install_examples(built, gw_env, *names):
    for name in names:
        r = run_cli("tool", "install", str(built / name), "--yes", env=gw_env["env"])
        assert r.returncode == 0, r.stderr


def test_wasm_tools_over_mcp(built, gw_env):
    install_examples(built, gw_env, "wordcount", "jsonlint")
    gw_env["config"].write_text(gw_env["config"].read_text() + ALLOW_WASM)
    (gw_env["ws"] / "notes.txt").write_text("three little words\n")

    async def main():
        async with Client(stdio_params(gw_env, "--toolsets", "wasm")) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert set(tools) == {"wasm_wordcount_count", "wasm_jsonlint_validate"}
            assert tools["wasm_wordcount_count"].input_schema["required"] == ["path"]
            r = await c.call_tool("wasm_wordcount_count", {"path": "notes.txt"})
            assert not r.is_error and '"words": 3' in text(r), text(r)
            r = await c.call_tool("wasm_jsonlint_validate", {"text": "[1,]"})
            assert '"valid": false' in text(r)
            r = await c.call_tool("wasm_wordcount_count", {"path": "../../etc/passwd"})
            assert r.is_error and "cannot open" in text(r) and "root:" not in text(r)
            r = await c.call_tool("wasm_wordcount_count", {})
            assert r.is_error and "'path' is a required property" in text(r)

    anyio.run(main)


def test_wasm_tools_pass_the_policy_over_mcp(built, gw_env):
    install_examples(built, gw_env, "jsonlint")

    async def main():
        # No rule allows the tool: policy.defaults.tool is ask, and nobody is there.
        async with Client(stdio_params(gw_env, "--toolsets", "wasm")) as c:
            r = await c.call_tool("wasm_jsonlint_validate", {"text": "[]"})
            assert r.is_error and "Refused" in text(r) and "wasm_jsonlint_validate" in text(r)

    anyio.run(main)


def test_a_changed_tool_is_not_offered_over_mcp(built, gw_env):
    install_examples(built, gw_env, "jsonlint", "wordcount")
    gw_env["config"].write_text(gw_env["config"].read_text() + ALLOW_WASM)
    module = (
        gw_env["home"]
        / ".local"
        / "state"
        / "agentvisor"
        / "wasm"
        / "tools"
        / "jsonlint"
        / "tool.wasm"
    )
    module.write_bytes(module.read_bytes() + b"\0")

    async def main():
        async with Client(stdio_params(gw_env, "--toolsets", "wasm")) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert names == {"wasm_wordcount_count"}
            r = await c.call_tool("wasm_jsonlint_validate", {"text": "[]"})
            # The agent is told why (the docs promise the reason), not just "not available".
            assert r.is_error and "not offered" in text(r), text(r)
            assert "jsonlint" in text(r) and "changed" in text(r), text(r)

    anyio.run(main)
