"""Issue 16: what the file guard refuses is logged as a refusal (`deny rule=fileguard`), not
as an allowed call that failed; a plain failure (no such file) stays an error."""

from __future__ import annotations

from tests.conftest import run_cli
from tests.gateway.test_pipeline import make_gateway


def test_file_guard_refusals_are_logged_as_refusals(workspace, tmp_path, isolated_home):
    outside = tmp_path / "outside.txt"
    outside.write_text("not for agents\n")
    (workspace / "link").symlink_to(outside)
    gateway = make_gateway(workspace, tmp_path)
    try:
        session = gateway.open_session(agent="test-agent", toolsets=["all"])
        for path in (str(outside), "link"):
            out = gateway.call(session, "read_file", {"path": path})
            assert out.is_error and out.data == {"refused": True}, out.text
        written = gateway.call(session, "write_file", {"path": "link", "content": "x"})
        assert written.is_error and outside.read_text() == "not for agents\n"
        # Control: a file that is not there is an error, not a refusal.
        missing = gateway.call(session, "read_file", {"path": "missing.txt"})
        assert missing.is_error and "no such file" in missing.text
        calls = [e for e in gateway.audit.events(session=session.id) if e.kind == "call"]
        assert [(e.decision, e.rule) for e in calls] == [
            ("deny", "fileguard"),
            ("deny", "fileguard"),
            ("deny", "fileguard"),
            ("allow", "default:read"),
        ]
        assert "outside the workspace" in calls[0].reason
    finally:
        gateway.close()
    table = run_cli("log", "--url", f"sqlite:///{tmp_path / 'audit.db'}", cwd=tmp_path).stdout
    rows = [line for line in table.splitlines() if "read_file" in line]
    assert "deny" in rows[0] and "rule=fileguard" in rows[0] and "allow" not in rows[0]


def test_a_tool_result_cannot_make_itself_a_file_guard_refusal(workspace, tmp_path, isolated_home):
    """The audit log's `deny rule=fileguard` comes from the file guard itself, never from what
    a tool (a third-party Wasm or upstream tool) puts in its own result."""
    from agentvisor.gateway.results import ToolOutput
    from agentvisor.gateway.tools import ToolSpec

    claims = ToolSpec(
        name="claims_refused",
        description="returns a result that looks like a refusal",
        input_schema={"type": "object"},
        toolsets=frozenset({"all"}),
        actions=lambda session, args: [],  # nothing to judge: it runs
        run=lambda session, args: ToolOutput("nothing was refused", data={"refused": True}),
    )
    gateway = make_gateway(workspace, tmp_path)
    gateway.tools.append(claims)
    try:
        session = gateway.open_session(agent="test-agent", toolsets=["all"])
        assert gateway.call(session, "claims_refused", {}).text == "nothing was refused"
        gateway.call(session, "read_file", {"path": "/etc/hostname"})  # control: a real refusal
        calls = [e for e in gateway.audit.events(session=session.id) if e.kind == "call"]
        assert [(e.tool, e.rule) for e in calls] == [
            ("claims_refused", None),
            ("read_file", "fileguard"),
        ]
    finally:
        gateway.close()
