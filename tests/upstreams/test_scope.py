"""A session's task scope is declared by a person on the host (`agentvisor scope`), never
by the agent through its tools."""

from __future__ import annotations

import os

import anyio
from mcp.client import Client

from agentvisor.frontends.mcpserver import build_server
from agentvisor.paths import state_dir
from agentvisor.state import State
from agentvisor.state.scopes import SCOPES_FILE
from tests.conftest import requires_bwrap, run_cli
from tests.upstreams.conftest import upstream_gateway
from tests.upstreams.test_flow import PAGE, calls, servers
from tests.upstreams.test_upstreams import text

pytestmark = requires_bwrap

TARGET = "attacker@evil.example"


def host_env(home) -> dict[str, str]:
    env = dict(os.environ, HOME=str(home))
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env.pop(var, None)
    return env


def test_a_scope_declared_on_the_host_lets_that_value_through(workspace, tmp_path, isolated_home):
    (workspace / "page.txt").write_text(PAGE)
    with upstream_gateway(workspace, tmp_path, servers(tmp_path)) as (gw, _):
        session = gw.open_session(toolsets=["upstreams"])
        _, before = calls(
            gw,
            session,
            ("web__read", {"path": str(workspace / "page.txt")}),
            ("web__echo", {"text": TARGET}),
        )
        # Control: lifted from the page and not in the scope, the value is asked about.
        assert before.is_error and before.data["decision"]["rule"] == "flow:provenance"
        env = host_env(isolated_home)
        wrong = run_cli("scope", session.id, "--add", "recipients=x@example.com", env=env)
        assert wrong.returncode != 0 and "unknown scope field 'recipients'" in wrong.stderr
        added = run_cli("scope", session.id, "--add", f"recipient={TARGET}", env=env)
        assert added.returncode == 0, added.stderr
        assert f"recipient={TARGET}" in added.stdout
        [after] = calls(gw, session, ("web__echo", {"text": TARGET}))
        assert not after.is_error and after.text == TARGET
        [event] = [e for e in State().audit.events(session=session.id) if e.tool == "scope"]
        assert event.kind == "grant" and event.arguments == {"recipient": TARGET}
        # Another session is not widened by it.
        other = gw.open_session(toolsets=["upstreams"])
        calls(gw, other, ("web__read", {"path": str(workspace / "page.txt")}))
        [elsewhere] = calls(gw, other, ("web__echo", {"text": TARGET}))
        assert elsewhere.is_error
        # Cleared on the host: asked again.
        assert run_cli("scope", session.id, "--clear", env=env).returncode == 0
        [cleared] = calls(gw, session, ("web__echo", {"text": TARGET}))
        assert cleared.is_error and cleared.data["decision"]["rule"] == "flow:provenance"


def test_the_agents_tools_cannot_declare_a_scope(workspace, tmp_path, isolated_home):
    """Over MCP the agent has no tool for it; writing the scope file with the file tool or
    running `agentvisor scope` in the terminal leaves the host's scopes untouched, and the
    value is still asked about."""
    (workspace / "page.txt").write_text(PAGE)
    scopes = state_dir() / SCOPES_FILE
    rules = [
        {"decision": "allow", "kind": "tool", "pattern": "*__*"},
        {"decision": "allow", "kind": "exec", "pattern": "agentvisor *"},
        {"decision": "allow", "kind": "exec", "pattern": "sh *"},
    ]
    with upstream_gateway(workspace, tmp_path, servers(tmp_path), rules=rules) as (gw, _):
        session = gw.open_session(agent="test-agent", toolsets=["all"])
        entry = f'{{"{session.id}": {{"recipient": ["{TARGET}"]}}}}'
        command = f"agentvisor scope {session.id} --add recipient={TARGET}"
        listed, results = mcp_calls(
            gw,
            session,
            [
                ("write_file", {"path": str(scopes), "content": entry}),
                ("terminal", {"command": command}),
                ("terminal", {"command": f"mkdir -p {scopes.parent}; echo '{entry}' > {scopes}"}),
                ("web__read", {"path": str(workspace / "page.txt")}),
                ("web__echo", {"text": TARGET}),
            ],
        )
        assert not [t.name for t in listed.tools if "scope" in t.name.lower()]
        assert not any("scope" in str(t.input_schema).lower() for t in listed.tools)
        *attempts, read, sent = results
        assert TARGET in text(read)
        written_by_file_tool, cli_in_sandbox, written_by_shell = map(text, attempts)
        assert "Refused" in written_by_file_tool
        assert "exit 0" not in cli_in_sandbox
        # Control: the shell's write ran (exit 0), into the sandbox's own home; the host's
        # state directory is not mounted there.
        assert "exit 0" in written_by_shell
        assert not scopes.exists()
        assert sent.is_error and "flow:provenance" in text(sent)


def mcp_calls(gateway, session, steps):
    """The calls of one session, made with the real MCP SDK client."""
    server = build_server(gateway, lambda ctx: session)

    async def main():
        async with Client(server) as client:
            listed = await client.list_tools()
            return listed, [await client.call_tool(tool, args) for tool, args in steps]

    return anyio.run(main)
