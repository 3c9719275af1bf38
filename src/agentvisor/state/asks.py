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


def render(request: ApprovalRequest) -> str:
    """The text of an ask as a person sees it: what, why, who (the terminal prompt's body
    and the approvals table's ``text``)."""
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
    return "\n".join(lines) + "\n\n"
