"""Fixtures for the policy tests: an engine over a config given as a mapping, with a
fixed home directory and workspace so decisions do not depend on the machine."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from agentvisor.actions import Action, Context, Decision
from agentvisor.config import Config, config_from_dict
from agentvisor.policy import PolicyEngine

if TYPE_CHECKING:
    from agentvisor.actions import Kind

HOME = "/home/alice"
WORKSPACE = "/home/alice/project"


def make_engine(data: dict[str, Any] | None = None, grants: Any = None) -> PolicyEngine:
    config = config_from_dict(data, source="test.yaml") if data else Config()
    return PolicyEngine.from_config(config, grants=grants, home=HOME)


def ctx(**kw: Any) -> Context:
    kw.setdefault("workspace", WORKSPACE)
    return Context(**kw)


Decide = Callable[..., Decision]


@pytest.fixture(scope="session")
def default_engine() -> PolicyEngine:
    return make_engine()


@pytest.fixture
def decide(default_engine: PolicyEngine) -> Decide:
    def run(kind: Kind, target: str, **kw: Any) -> Decision:
        context = ctx(**{k: kw.pop(k) for k in ("session", "agent", "toolset", "tool") if k in kw})
        return default_engine.decide(Action(kind, target, **kw), context)

    return run
