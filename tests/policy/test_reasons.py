"""An allowed command's reason says what contains it, and is true for the configuration:
the backend that runs it, what it can change, and whether a change can be undone."""

from __future__ import annotations

from types import SimpleNamespace

from agentvisor.actions import Action
from agentvisor.policy.engine import containment

from .conftest import ctx, make_engine


def test_isolating_backend_names_itself_and_what_it_can_change() -> None:
    engine = make_engine({"sandbox": {"backend": "bwrap"}})
    decision = engine.decide(Action("exec", "rm -rf build"), ctx())
    assert decision.verdict == "allow"
    assert "bwrap sandbox" in decision.reason and "only in the workspace" in decision.reason
    assert "cannot be undone" in decision.reason  # direct: no changeset to undo with


def test_local_backend_does_not_claim_a_sandbox() -> None:
    engine = make_engine({"sandbox": {"backend": "local"}})
    decision = engine.decide(Action("exec", "rm -rf build"), ctx())
    assert decision.verdict == "allow"
    assert "in the sandbox" not in decision.reason
    assert "nothing contains it" in decision.reason


def test_write_roots_are_named_when_configured() -> None:
    engine = make_engine({"sandbox": {"backend": "bwrap"}, "files": {"write_roots": ["/tmp/x"]}})
    reason = engine.decide(Action("exec", "ls"), ctx()).reason
    assert "files.write_roots" in reason


def test_a_changeset_makes_a_change_undoable() -> None:
    def config(mode: str | None) -> SimpleNamespace:
        workspace = SimpleNamespace(mode=mode) if mode else None
        return SimpleNamespace(
            sandbox=SimpleNamespace(backend="bwrap"),
            files=SimpleNamespace(write_roots=[]),
            workspace=workspace,
        )

    assert "can be undone" in containment(config("auto"))
    assert "can be undone" in containment(config("review"))
    assert "cannot be undone" in containment(config("direct"))
    assert "cannot be undone" in containment(config(None))
