"""A Wasm tool's flow labels follow from the capabilities its manifest was granted."""

from __future__ import annotations

import pytest

from agentvisor.approvals import ApprovalBroker
from agentvisor.config import config_from_dict
from agentvisor.gateway import Gateway
from agentvisor.gateway.tools import builtin_tools
from agentvisor.sandbox import Result, Sandbox
from agentvisor.sandbox.fake import FakeBackend
from agentvisor.state.events import SQLiteAuditLog
from agentvisor.wasm.gateway import tool_specs
from agentvisor.wasm.manifest import Capabilities, flow_labels

from .helpers import install, probe_manifest, tool_dir


@pytest.mark.parametrize(
    ("capabilities", "labels"),
    [
        ({}, set()),
        ({"files": [{"path": "docs"}]}, {"private_read"}),
        ({"files": [{"path": "out", "access": "write"}]}, {"private_read", "internal_write"}),
        ({"env": ["LANG"]}, {"private_read"}),
        ({"network": ["api.example.com"]}, {"untrusted_read", "external_write"}),
        (
            {"network": ["api.example.com"], "secrets": ["API_TOKEN"]},
            {"untrusted_read", "external_write"},
        ),
    ],
)
def test_labels_from_capabilities(capabilities, labels) -> None:
    assert flow_labels(Capabilities.model_validate(capabilities)) == labels


def test_only_a_tool_with_network_is_asked_after_untrusted_content(
    probe, store, ws, tmp_path, server
) -> None:
    """In the blunt trifecta mode, after a web page was read: the offline tool runs, the
    one granted a host is held for a person (nobody answers here: refused)."""
    install(store, tool_dir(tmp_path, probe, probe_manifest("offline")))
    online = probe_manifest("online", capabilities={"network": [server.hostport]})
    install(store, tool_dir(tmp_path, probe, online))
    cfg = config_from_dict(
        {
            "flow": {"mode": "trifecta"},
            "rules": [{"decision": "allow", "kind": "tool", "pattern": "wasm_*"}],
        }
    )
    gateway = Gateway(
        cfg,
        workspace=ws,
        broker=ApprovalBroker(cfg, channels=[], grants=None),
        audit=SQLiteAuditLog(tmp_path / "audit.db"),
        sandbox=Sandbox(cfg, workspace=ws, backend=FakeBackend(lambda argv: Result(0, b"", b""))),
        extra_tools=lambda gw: tool_specs(gw, store),
    )
    try:
        specs = {t.name: t for t in gateway.tools}
        assert specs["wasm_offline_echo"].labels == frozenset()
        assert specs["wasm_online_echo"].labels == {"untrusted_read", "external_write"}
        session = gateway.open_session(toolsets=["all"])
        # Control: before any untrusted read, the tool with network runs too.
        assert not gateway.call(session, "wasm_online_echo", {"n": 1}).is_error
        web = next(t for t in builtin_tools() if t.name == "web_extract")
        gateway.flow.record(session, web, {"url": "https://example.com"}, "a page, any text")
        assert not gateway.call(session, "wasm_offline_echo", {"n": 2}).is_error
        held = gateway.call(session, "wasm_online_echo", {"n": 3})
        assert held.is_error and held.data["decision"]["rule"] == "flow:trifecta"
    finally:
        gateway.close()
