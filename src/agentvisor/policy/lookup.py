"""Which rule or grant decides a piece: deny rules first, then ask rules, then allow
rules and grants; the first that matches wins. Grants are compiled into rules as they
change."""

from __future__ import annotations

from ..actions import Context
from .rules import Condition, Rule, RuleIndex, compile_matcher

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from .facts import Invocation

Found = tuple[str, Rule] | None


def _indexes(decision: str, rules: RuleIndex, grants: RuleIndex) -> tuple[RuleIndex, ...]:
    """Grants only ever allow: they take part in the allow step alone."""
    return (rules,) if decision != "allow" else (rules, grants)


def find(
    rules: RuleIndex,
    grants: RuleIndex,
    kind: str,
    context: Context,
    now: float,
    test: Callable[[Rule], Any],
) -> Found:
    for decision in ("deny", "ask", "allow"):
        for index in _indexes(decision, rules, grants):
            rule = index.first(kind, decision, context, now, test)
            if rule is not None:
                return decision, rule
    return None


def find_path(
    rules: RuleIndex,
    grants: RuleIndex,
    kind: str,
    path: str,
    workspace: str,
    context: Context,
    now: float,
) -> Found:
    for decision in ("deny", "ask", "allow"):
        for index in _indexes(decision, rules, grants):
            rule = index.path_rules(kind, decision, path, workspace, context, now)
            if rule is not None:
                return decision, rule
    return None


def find_exec(
    rules: RuleIndex,
    grants: RuleIndex,
    inv: Invocation,
    context: Context,
    now: float,
    reads: tuple[str, ...],
    writes: tuple[str, ...],
    workspace: str,
) -> Found:
    for decision in ("deny", "ask", "allow"):
        for index in _indexes(decision, rules, grants):
            for rule in index.exec_candidates(decision, inv.program):
                if rule.active(context, now) and rule.matcher.match(inv, decision == "allow"):
                    return decision, rule
        if decision == "allow":
            break
        # A path rule for reading or writing also holds for commands that do it.
        for kind, paths in (("read", reads), ("write", writes)):
            for path in paths:
                path_rule = rules.path_rules(kind, decision, path, workspace, context, now)
                if path_rule is not None:
                    return decision, path_rule
    return None


class GrantRules:
    """The active grants of a `GrantStore` (or None) as allow rules, recompiled only
    when the set of active grants changes."""

    def __init__(self, store: Any, home: str) -> None:
        self.store = store
        self.home = home
        self._key: tuple[str, ...] = ()
        self._index = RuleIndex([])

    def index(self, now: float) -> RuleIndex:
        if self.store is None:
            return self._index
        active = self.store.active(now)
        key = tuple(g.id for g in active)
        if key != self._key:
            self._index = RuleIndex([r for r in (self._rule(g) for g in active) if r])
            self._key = key
        return self._index

    def _rule(self, g: Any) -> Rule | None:
        try:
            matcher = compile_matcher(g.kind, g.pattern, self.home)
        except ValueError:
            return None  # a grant written by hand that does not compile grants nothing
        when = Condition(session=(g.session,)) if g.session else None
        name = f"grant:{g.id}"
        return Rule("allow", g.kind, g.pattern, name, matcher, when, None, g.expires_at, g.reason)
