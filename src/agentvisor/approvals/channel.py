"""What an approval channel is: something that can put a question to a person.

A channel gets an `ApprovalRequest` and a ``submit`` callback, starts asking (in its own
thread, or by sending a message somewhere) and returns at once. When a person answers it
calls ``submit(Answer(...))``. Several channels ask at the same time; the first answer
that reaches `Pending` wins and the others are cancelled. A terminal channel lives in
``terminal.py``; a web dashboard or a webhook is another module with the same methods.
The value types (`ApprovalRequest`, `Answer`) live in `agentvisor.state.asks`, where the
shared queue uses them too.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Protocol

from ..state.asks import Answer, ApprovalRequest

if TYPE_CHECKING:
    from ..state.asks import SubmitFn


class Channel(Protocol):
    """One way to reach a person."""

    name: str
    where: str  # where a person answers, as the waiting agent is told

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
    """One open request: thread-safe, and only the first answer before `close` counts."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._closed = False
        self.answer: Answer | None = None

    def submit(self, answer: Answer) -> bool:
        with self._lock:
            if self.answer is not None or self._closed:
                return False
            self.answer = answer
            self._done.set()
            return True

    def answered(self) -> bool:
        return self.answer is not None

    def close(self) -> None:
        """No more answers accepted (settled, timed out or withdrawn)."""
        with self._lock:
            self._closed = True
            self._done.set()

    def wait(self, timeout: float) -> Answer | None:
        self._done.wait(timeout)
        with self._lock:
            return self.answer
