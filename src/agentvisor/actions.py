"""The vocabulary every layer shares: an action an agent wants to take, its context, and
the decision the policy engine makes about it.

A tool call becomes one or more actions (``terminal`` → ``exec``; ``write_file`` →
``write``; ``http_request`` → ``fetch`` and maybe ``secret``). The policy engine judges
each and returns a `Decision` that always carries a reason a person can read.
"""

from __future__ import annotations

from .records import Declared

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from typing import Any, Literal

    Kind = Literal["exec", "read", "write", "fetch", "secret", "tool"]
    Verdict = Literal["allow", "ask", "deny"]

KINDS: tuple[str, ...] = ("exec", "read", "write", "fetch", "secret", "tool")

# Higher wins when several rules or categories match one action.
SEVERITY: dict[str, int] = {"allow": 0, "ask": 1, "deny": 2}


class Action(Declared):
    """One thing an agent wants to do.

    ``target`` is the command line (exec), the path (read/write), the URL or
    ``host[:port]`` (fetch), the secret's name (secret) or the tool's name (tool).
    """

    kind: Kind
    target: str
    method: str | None = None  # fetch: the HTTP method
    host: str | None = None  # secret: the host the value would be sent to
    argv: tuple[str, ...] | None = None  # exec: an argv known without a shell
    arguments: dict[str, Any] | None = None  # tool: the call's arguments


class Context(Declared):
    """Who acts and where; rule conditions and grants match against it."""

    session: str | None = None
    agent: str | None = None
    toolset: str | None = None
    workspace: str | None = None
    tool: str | None = None  # the tool whose call produced the action (e.g. web_extract)


class Decision(Declared):
    """The policy's answer for one action, always with a reason a person understands.

    ``rule`` names what decided: ``FILE rules[N]`` (or the rule's id) for a user rule,
    ``grant:ID`` for a grant, ``hardline:NAME`` / ``category:NAME`` for a built-in
    category, ``default:KIND`` when nothing matched. ``hint`` says how a person could
    allow the action, for refusals.
    """

    verdict: Verdict
    reason: str
    rule: str | None = None
    hardline: bool = False
    hint: str | None = None
    details: tuple[str, ...] = ()
    # The built-in categories that matched; patterns that would allow exactly this action
    # (what an approval "for this session" or "always" records); who settled an ask.
    categories: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    approver: str | None = None

    @property
    def allowed(self) -> bool:
        return self.verdict == "allow"

    def as_dict(self) -> dict[str, Any]:
        return {
            "decision": self.verdict,
            "reason": self.reason,
            "rule": self.rule,
            "hardline": self.hardline,
            "hint": self.hint,
            "details": list(self.details),
            "categories": list(self.categories),
            "patterns": list(self.patterns),
            "approver": self.approver,
        }
