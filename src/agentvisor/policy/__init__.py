"""The policy: allow / ask / deny for every action an agent takes, with the reason.

    engine = PolicyEngine.from_config(load_config())
    decision = engine.decide(Action("exec", "git push --force"), Context(session="s1"))

Importing this package is cheap (no tree-sitter, pydantic or YAML): `agentvisor exec`
imports it on every run. The shell grammar loads on the first command that needs it.
"""

from __future__ import annotations

from .engine import PolicyEngine

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from typing import Any

__all__ = ["CATEGORIES", "HARDLINE", "PolicyEngine"]


def __getattr__(name: str) -> Any:
    if name in ("CATEGORIES", "HARDLINE"):
        from . import categories

        return getattr(categories, name)
    raise AttributeError(name)
