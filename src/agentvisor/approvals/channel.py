"""What an approval channel is: something that can put a question to a person.

A channel gets an `ApprovalRequest` and a ``submit`` callback, starts asking (in its own
thread, or by sending a message somewhere) and returns at once. When a person answers it
calls ``submit(Answer(...))``. Several channels ask at the same time; the first answer
that reaches `Pending` wins and the others are cancelled. A terminal channel lives in
``terminal.py``; a web dashboard or a webhook is another module with the same methods.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from ..actions import Action, Context, Decision

Choice = Literal["once", "session", "always", "deny"]
_ids = itertools.count(1)


@dataclass(frozen=True)
class ApprovalRequest:
    """An ask that needs a person: the action, who asked, and why the policy asked."""

    action: Action
    context: Context
    decision: Decision
    config_files: tuple[str, ...] = ()  # where an "always" rule may be written
    id: int = field(default_factory=lambda: next(_ids))

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


@dataclass(frozen=True)
class Answer:
    """A person's answer. ``reason`` is shown to the agent on a deny; ``config_file`` is
    where an "always" rule goes (the person picked it and saw the rule first)."""

    choice: Choice
    channel: str
    approver: str = "a person"
    reason: str = ""
    config_file: str | None = None


SubmitFn = Callable[[Answer], bool]


class Channel(Protocol):
    """One way to reach a person."""

    name: str

    def available(self) -> bool:
        """Can a person be reached this way right now?"""
        ...

    def ask(self, request: ApprovalRequest, submit: SubmitFn) -> None:
        """Start asking; return at once; call ``submit`` with the person's answer."""
        ...

    def cancel(self, request: ApprovalRequest, outcome: str) -> None:
        """The request was settled (another channel answered, or time ran out)."""
        ...


class Pending:
    """One open request: thread-safe, and only the first answer counts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.answer: Answer | None = None

    def submit(self, answer: Answer) -> bool:
        with self._lock:
            if self.answer is not None:
                return False
            self.answer = answer
            self._done.set()
            return True

    def close(self) -> None:
        """No more answers accepted (time ran out)."""
        with self._lock:
            self._done.set()

    def wait(self, timeout: float) -> Answer | None:
        self._done.wait(timeout)
        with self._lock:
            return self.answer
