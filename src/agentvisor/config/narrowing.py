"""Does a project file only narrow the operator's configuration? (docs/configuration.md)

A project file (``agentvisor.yaml`` found in the current directory or a parent) is written
where the sandboxed agent may write, so unless the operator trusted it, it may only make
things stricter. This module compares the merged configuration with the operator's alone,
key by key, by the values: each field of the schema says in its annotation which way its
values widen (`MORE`, `LESS`, `Ranked`, `GRANTS`, `RESTRICTS`, `RULES`); a field that says
nothing may not change at all. Sections are compared key by key.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from ..records import Declared


class Widening(Declared):
    """Which change of a key's value widens what the configuration allows."""

    how: str
    ranking: tuple[object, ...] = ()  # for "ranked": narrowest first


# A larger number widens (a limit, a timeout); None (no limit) is the widest.
MORE = Widening("more")
# A smaller number widens (such as how long evidence is kept); None is the narrowest.
LESS = Widening("less")
# A list of things granted (mounts, passed variables, ...): only removing narrows.
GRANTS = Widening("grants")
# A list of things refused (protected paths, blocked ranges): only adding narrows.
RESTRICTS = Widening("restricts")
# The rules: keep every one, add only deny and ask rules.
RULES = Widening("rules")
# Toolset names: only fewer tools narrow ("debugging" stands for terminal, file and web).
TOOLSETS = Widening("toolsets")


def Ranked(*ranking: object) -> Widening:
    """Values from narrowest to widest; a change to a value not listed is a widening."""
    return Widening("ranked", ranking)


# Which toolsets each named toolset stands for; "all" stands for every tool.
TOOLSET_GROUPS: dict[str, frozenset[str]] = {
    "file": frozenset({"file"}),
    "terminal": frozenset({"terminal"}),
    "web": frozenset({"web"}),
    "http": frozenset({"http"}),
    "safe": frozenset({"web"}),
    "debugging": frozenset({"terminal", "file", "web"}),
    "wasm": frozenset({"wasm"}),
}


def widenings(operator: BaseModel, merged: BaseModel, prefix: str = "") -> list[str]:
    """Each key where ``merged`` allows more than ``operator``, with why."""
    found: list[str] = []
    for name, field in type(merged).model_fields.items():
        if name == "source":
            continue
        key = prefix + name
        before, after = getattr(operator, name), getattr(merged, name)
        if isinstance(before, BaseModel) and isinstance(after, BaseModel):
            found += widenings(before, after, f"{key}.")
            continue
        how = next((m for m in field.metadata if isinstance(m, Widening)), None)
        why = _widens(how, before, after)
        if why:
            found.append(f"{key}: {why}")
        elif how is RULES:
            found += _asks_over_denials(operator, before, after)
    return found


def _asks_over_denials(operator: BaseModel, before: list[Any], after: list[Any]) -> list[str]:
    """New ask rules where the operator denies by default. An ask rule outranks the default
    for its kind, so there it turns a refusal into a question a person (or the smart
    judge) may answer yes: a widening. The egress proxy denies every destination no rule
    allows, so a fetch ask rule always is one; a project narrows fetches with deny rules."""
    defaults = getattr(getattr(operator, "policy", None), "defaults", None)
    found = []
    for index, rule in enumerate(after):
        if rule in before or rule.decision != "ask":
            continue
        denied = rule.kind == "fetch" or getattr(defaults, rule.kind, None) == "deny"
        if denied:
            why = (
                "the egress proxy denies what no rule allows"
                if rule.kind == "fetch"
                else f"the operator's policy.defaults.{rule.kind} is deny"
            )
            found.append(
                f"rules: {rule.id or index}: an ask rule ({rule.kind} {rule.pattern}) turns "
                f"a denial into a question ({why}); use a deny rule"
            )
    return found


def _widens(how: Widening | None, before: Any, after: Any) -> str | None:
    if before == after:
        return None
    shown = f"{_show(before)} -> {_show(after)}"
    if how is None:
        return f"may not be changed by a project file ({shown})"
    if how.how in ("more", "less"):
        return _number_widens(how.how, before, after, shown)
    if how.how == "ranked":
        ranks = how.ranking
        if before in ranks and after in ranks and ranks.index(after) <= ranks.index(before):
            return None
        return f"widens it ({shown})"
    if how.how == "toolsets":
        added = _tools(after) - _tools(before)
        return f"adds the toolsets {sorted(added)}" if added else None
    return _list_widens(how.how, list(before), list(after))


def _number_widens(how: str, before: Any, after: Any, shown: str) -> str | None:
    if how == "more":
        wider = after is None or (before is not None and after > before)
        return f"raises the limit ({shown})" if wider else None
    wider = before is None or (after is not None and after < before)
    return f"lowers it ({shown})" if wider else None


def _list_widens(how: str, before: list[Any], after: list[Any]) -> str | None:
    if how == "grants":
        added = [item for item in after if item not in before]
        return f"grants {_show(added)} beyond the operator's list" if added else None
    removed = [item for item in before if item not in after]
    if removed:
        return f"drops {_show(removed)} of the operator's entries"
    if how == "rules":
        # deny > ask > allow whatever the order, so new deny and ask rules only narrow.
        allowing = [rule for rule in after if rule not in before and rule.decision == "allow"]
        if allowing:
            return f"adds allow rules ({', '.join(rule.pattern for rule in allowing)})"
    return None


def _tools(names: list[str]) -> frozenset[str]:
    """What a toolset list gives, as tool groups ("all": everything, more than any list)."""
    if "all" in names:
        return frozenset({"all"}).union(*TOOLSET_GROUPS.values())
    return frozenset().union(*(TOOLSET_GROUPS.get(name, {name}) for name in names))


def _show(value: Any) -> str:
    if isinstance(value, BaseModel):
        return repr(value.model_dump(exclude_defaults=True))
    if isinstance(value, list):
        return "[" + ", ".join(_show(item) for item in value) + "]"
    return repr(value)
