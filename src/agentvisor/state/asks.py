"""What a person is asked and how they answer: the value types the approval channels, the
shared approval queue and the dashboard exchange.

They live here, below `agentvisor.approvals`, because the queue (`state.approvals`) stores
and answers asks and must not import the layer above it. No SQLAlchemy here: the
`agentvisor exec` path imports this module through the approval broker.
"""

from __future__ import annotations

import itertools

from ..actions import Action, Context, Decision
from ..records import Declared, Default

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Literal, TypeAlias

    Choice: TypeAlias = Literal["once", "session", "always", "deny"]
    SubmitFn: TypeAlias = Callable[["Answer"], bool]

_ids = itertools.count(1)


class ApprovalRequest(Declared):
    """An ask that needs a person: the action, who asked, and why the policy asked."""

    action: Action
    context: Context
    decision: Decision
    config_files: tuple[str, ...] = ()  # where an "always" rule may be written
    id: int = Default(factory=lambda: next(_ids))

    @property
    def choices(self) -> tuple[Choice, ...]:
        """Session and always need a pattern that allows exactly this action, and an ask
        that an allow can lift: a category's or a default's, never an explicit ask rule's
        (ask rules outrank allow rules and grants)."""
        liftable = (self.decision.rule or "").startswith(("category:", "default:"))
        if not self.decision.patterns or not liftable:
            return ("once", "deny")
        scoped: tuple[Choice, ...] = ("session",) if self.context.session else ()
        always: tuple[Choice, ...] = ("always",) if self.config_files else ()
        return ("once", *scoped, *always, "deny")


class Answer(Declared):
    """A person's answer. ``reason`` is shown to the agent on a deny; ``config_file`` is
    where an "always" rule goes (the person picked it and saw the rule first)."""

    choice: Choice
    channel: str
    approver: str = "a person"
    reason: str = ""
    config_file: str | None = None


# Characters a terminal acts on rather than shows: C0 and C1 controls (ESC starts a
# sequence that moves the cursor, erases lines, sets the clipboard), DEL, and the Unicode
# bidirectional and zero-width marks that reorder or hide text.
_ACTING = frozenset(
    {*range(0x20), *range(0x7F, 0xA0), *range(0x200B, 0x2010), *range(0x202A, 0x202F)}
    | {*range(0x2066, 0x206A), 0xFEFF}
)


def visible(text: str, keep: str = "") -> str:
    """``text`` with every character a terminal would act on, but those in ``keep`` (a
    diff's newlines and tabs), written as an escape (``\\x1b``): what the agent sent is
    shown, never obeyed (an ESC sequence in a command erased the lines above it and wrote a
    harmless command in their place)."""
    return "".join(_escaped(c) if ord(c) in _ACTING and c not in keep else c for c in text)


def _escaped(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def render(request: ApprovalRequest) -> str:
    """The text of an ask as a person sees it: what, why, who (the terminal prompt's body
    and the approvals table's ``text``). Every line passes `visible`: the command, its
    pieces in the reason and the agent's names come from the agent."""
    import shlex

    a, d, c = request.action, request.decision, request.context
    lines = ["", "agentvisor: an agent wants to do something that needs your approval", ""]
    # An argv as a shell would need it typed: `bash -c 'git push --force'`, not bare words.
    target = a.target if a.argv is None else shlex.join(a.argv)
    lines.append(
        f"  {a.kind}: {target}"
        + (f"   ({a.method})" if a.method else "")
        + (f"   toward {a.host}" if a.host else "")
    )
    lines.append(f"  why:  {d.reason}")
    if d.rule:
        lines.append(f"  rule: {d.rule}")
    for detail in d.details[:8]:
        if detail != d.reason:
            lines.append(f"        - {detail}")
    who = ", ".join(
        f"{k} {v}" for k, v in (("session", c.session), ("agent", c.agent), ("tool", c.tool)) if v
    )
    if who:
        lines.append(f"  from: {who}")
    # Name only the answers this ask offers.
    widening = [f"'{choice}'" for choice in request.choices if choice in ("session", "always")]
    if widening and d.patterns:
        lines.append(f"  {' and '.join(widening)} would allow: {', '.join(d.patterns)}")
    return "\n".join(visible(line) for line in lines) + "\n\n"
