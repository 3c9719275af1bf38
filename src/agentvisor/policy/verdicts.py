"""From findings and rules to a verdict: one `Piece` per part of an action, combined
into the action's `Decision` (the strictest piece wins) with a hint for a person."""

from __future__ import annotations

import shlex

from ..actions import SEVERITY, Action, Decision
from ..records import Declared, replace

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from ..actions import Verdict
    from .judge import Finding
    from .rules import Rule

# A piece's verdict as the Decision's type; an unknown verdict is a bug and fails loudly.
_VERDICTS: dict[str, Verdict] = {"allow": "allow", "ask": "ask", "deny": "deny"}


class Piece(Declared):
    """The verdict on one piece of an action."""

    verdict: str
    reason: str
    rule: str
    text: str
    hardline: bool = False
    categories: tuple[str, ...] = ()
    pattern: str | None = None  # a pattern that would allow exactly this piece
    by_rule: bool = False  # decided by a rule or grant (not a category or default)


def finding_piece(f: Finding, text: str) -> Piece:
    prefix = "hardline" if f.hardline else "category"
    return Piece(
        f.verdict,
        f.reason,
        f"{prefix}:{f.category}",
        text,
        hardline=f.hardline,
        categories=(f.category,),
    )


def piece_for(
    text: str,
    findings: tuple[Finding, ...],
    rule: tuple[str, Rule] | None,
    pattern: str | None,
    kind: str,
    default: str,
    why: str,
) -> Piece:
    """The verdict on one piece: hardline finding, then the rule that matched, then
    an asking category, then the default for the kind."""
    hard = next((f for f in findings if f.hardline), None)
    if hard is not None:
        return finding_piece(hard, text)
    cats = tuple(dict.fromkeys(f.category for f in findings))
    if rule is not None:
        decision, r = rule
        if decision != "allow":
            words = {"deny": "denied", "ask": "needs approval"}[decision]
            note = f" ({r.reason})" if r.reason else ""
            return Piece(
                decision,
                f"{text}: {words} by {r.name}{note}",
                r.name,
                text,
                categories=cats,
                pattern=pattern,
                by_rule=True,
            )
        lifted = f"; it would otherwise ask: {findings[0].reason}" if findings else ""
        return Piece(
            "allow",
            f"{text}: allowed by {r.name}{lifted}",
            r.name,
            text,
            categories=cats,
            pattern=pattern,
            by_rule=True,
        )
    asks = [f for f in findings if f.verdict != "allow"]
    if asks:
        first = asks[0]
        return Piece(
            "ask",
            first.reason,
            f"category:{first.category}",
            text,
            categories=cats,
            pattern=pattern,
        )
    words = {"allow": "allowed", "ask": "needs approval", "deny": "denied"}[default]
    return Piece(
        default,
        f"{text}: {words}: {why} (default for {kind}: {default})",
        f"default:{kind}",
        text,
        pattern=pattern,
    )


def combine(action: Action, pieces: list[Piece]) -> Decision:
    worst = max(pieces, key=lambda p: SEVERITY[p.verdict])
    verdict = _VERDICTS[worst.verdict]
    details = tuple(
        dict.fromkeys(
            p.reason if p.text in p.reason else f"{p.text}: {p.reason}"
            for p in pieces
            if p.verdict != "allow" or p.by_rule
        )
    )
    categories = tuple(
        dict.fromkeys(c for p in pieces if p.verdict != "allow" for c in p.categories)
    )
    patterns: tuple[str, ...] = ()
    if verdict == "ask":
        asking = [p for p in pieces if p.verdict == "ask"]
        if all(p.pattern for p in asking):
            patterns = tuple(dict.fromkeys(p.pattern for p in asking if p.pattern))
    reason = worst.reason
    if verdict == "allow" and not worst.by_rule:
        ruled = next((p for p in pieces if p.by_rule), None)
        worst = ruled or worst
        reason = worst.reason
    return Decision(
        verdict,
        reason,
        worst.rule,
        worst.hardline,
        hint(action, worst, patterns) if verdict != "allow" else None,
        details[:20],
        categories,
        patterns,
    )


def hint(action: Action, piece: Piece, patterns: tuple[str, ...]) -> str:
    if piece.hardline:
        category = piece.rule.split(":", 1)[1]
        return (
            "This is on agentvisor's hardline floor: no rule, grant, approval or "
            "approvals.mode can allow it. If it is really meant, a person can run it "
            "outside agentvisor, or switch the category off in the config "
            f"(policy.categories.{category}: false)."
        )
    if piece.by_rule:
        return f"A person can change or remove {piece.rule} in the config" + (
            ", or approve it when asked." if piece.verdict == "ask" else "."
        )
    kind = action.kind
    if patterns and any(awkward(kind, pattern) for pattern in patterns):
        allow = f"{BY_ID}, or a rule under rules: in the config"
    elif patterns:
        allow = (
            f"`{_grant_command(kind, patterns[0])}`, or a rule "
            f"`{{decision: allow, kind: {kind}, pattern: {_yaml(patterns[0])}}}` under "
            "rules: in the config"
        )
    else:
        allow = (
            "a rule under rules: in the config (the command has parts that are only "
            "known when it runs, so no exact pattern can be suggested)"
        )
    text = (
        "A person can approve it when asked" if piece.verdict == "ask" else "A person can allow it"
    )
    text += f", or allow it ahead of time: {allow}"
    if piece.rule.startswith("category:"):
        text += f"; or switch the category off (policy.categories.{piece.rule[9:]}: false)"
    return text + "."


# The grant by id, for patterns whose words cannot be typed back cleanly. The gateway
# records the refusal and puts its id in (`with_refusal_id`); without one (`check`), the
# text says where the id comes from.
BY_ID = (
    "`agentvisor grant --ask ID --for 30m` (ID: the id its refusal names; its words "
    "would need awkward quoting)"
)
_MAX_TYPED = 200  # characters of a grant command line a person can still check by eye


def awkward(kind: str, pattern: str) -> bool:
    """Would typing the grant for ``pattern`` need quotes inside quotes, characters a
    terminal does not show as themselves (newlines, controls, odd spaces), or a line
    too long to check by eye?"""
    command = _grant_command(kind, pattern)
    return "'\"'\"'" in command or not pattern.isprintable() or len(command) > _MAX_TYPED


def with_refusal_id(decision: Decision, refusal_id: str) -> Decision:
    """``decision`` with its grant-by-id hint naming ``refusal_id``."""
    if decision.hint is None or BY_ID not in decision.hint:
        return decision
    named = (
        f"`agentvisor grant --ask {refusal_id} --for 30m` (its words would need awkward quoting)"
    )
    bound: Decision = replace(decision, hint=decision.hint.replace(BY_ID, named))
    return bound


def _grant_command(kind: str, pattern: str) -> str:
    """The `agentvisor grant` command line for ``pattern``, quoted for a shell. A command
    pattern that is its words quoted the shell's way is given as those words (after --):
    quoting the whole pattern again would nest quotes, ``'git reset --hard '"'"'HEAD~3'"'"''``
    where the words read ``git reset --hard 'HEAD~3'``."""
    try:
        words = shlex.split(pattern) if kind == "exec" else []
    except ValueError:  # unbalanced quotes: not words
        words = []
    if len(words) > 1 and shlex.join(words) == pattern:
        return shlex.join(["agentvisor", "grant", kind, "--for", "30m", "--", *words])
    return shlex.join(["agentvisor", "grant", kind, pattern, "--for", "30m"])


def _yaml(text: str) -> str:
    import json

    return json.dumps(text)
