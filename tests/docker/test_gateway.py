"""The gateway on the docker backend: one container per session, the same policy."""

from __future__ import annotations

from agentvisor.approvals import ApprovalBroker
from agentvisor.config import config_from_dict
from agentvisor.gateway import Gateway
from agentvisor.state.events import SQLiteAuditLog


def test_session_keeps_a_container_and_policy_applies(ws, image, engine, tmp_path, isolated_home):
    config = config_from_dict(
        {"sandbox": {"backend": "docker", "docker": {"image": image}}, "approvals": {"timeout": 2}}
    )
    gateway = Gateway(
        config,
        workspace=ws,
        broker=ApprovalBroker(config, channels=[]),
        audit=SQLiteAuditLog(tmp_path / "audit.db"),
    )
    try:
        session = gateway.open_session(toolsets=["terminal"])
        out = gateway.call(session, "terminal", {"command": "echo kept > /tmp/state"})
        assert not out.is_error, out.text
        out = gateway.call(session, "terminal", {"command": "cat /tmp/state"})
        assert "kept" in out.text
        out = gateway.call(session, "terminal", {"command": "rm -rf / --no-preserve-root"})
        assert out.is_error and "Refused" in out.text and "hardline" in out.text
        label = {"label": f"agentvisor.session={session.id}"}
        assert engine.containers(filters=label)  # control: the session's container runs
        gateway.close_session(session)
        assert engine.containers(all=True, filters=label) == []
    finally:
        gateway.close()


def test_doctor_checks_the_engine_and_image(image, tmp_path):
    from tests.conftest import run_cli

    config = tmp_path / "c.yaml"
    config.write_text(f"sandbox: {{backend: docker, docker: {{image: '{image}'}}}}\n")
    r = run_cli("doctor", "--config", str(config))
    assert r.returncode == 0 and f"image {image} present" in r.stdout
    config.write_text("sandbox: {backend: docker, docker: {image: 'no-such-image:1'}}\n")
    r = run_cli("doctor", "--config", str(config))
    assert r.returncode == 1 and "not present" in r.stdout
