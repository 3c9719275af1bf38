"""Asks that wait for a person without holding a thread, bounded, and bound to their caller.

A call whose action needs a person waits in the front end's event loop (`wait_for` polls
the ask), so 100 pending asks hold no worker thread and other sessions' calls keep their
speed. Each session and each client (the caller's token or address) may have only so many
asks pending: over the cap the next ask is denied at once with a reason, so one agent
cannot queue asks without end. An ask belongs to its caller: when the request is
cancelled, the client disconnects, the session closes or the gateway stops, the ask is
withdrawn (recorded as such) and a later answer runs nothing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Iterator

import anyio

from ..approvals.broker import Ask

POLL = 0.1  # seconds between looks at a pending ask (an answer is seen this fast)
PROGRESS_EVERY = 5.0  # seconds between MCP progress notifications while an ask waits

# progress(done, total, message): an MCP progress notification to the caller.
Progress = Callable[[float, float, str], Awaitable[None]]


class OpenAsks:
    """The asks a gateway's sessions wait on: counted for the caps, withdrawn with them.

    The caps are ``approvals.max_pending_per_session`` and ``approvals.max_pending_per_client``:
    over either, the next ask is denied (rule ``gateway:ask-limit``), naming the key."""

    def __init__(self, per_session: int, per_client: int) -> None:
        self.per_session = per_session
        self.per_client = per_client
        self._lock = threading.Lock()
        self._asks: dict[Ask, tuple[str, str]] = {}  # ask -> (session id, client)

    def over_limit(self, session: str, client: str) -> str | None:
        """Why one more ask from this session and client is refused, or None."""
        with self._lock:
            owners = list(self._asks.values())
        by_session = sum(1 for s, _ in owners if s == session)
        by_client = sum(1 for _, c in owners if c == client)
        if by_session >= self.per_session:
            return (
                f"this session already has {by_session} asks waiting for a person "
                f"(at most {self.per_session} at once: approvals.max_pending_per_session)"
            )
        if by_client >= self.per_client:
            return (
                f"this client already has {by_client} asks waiting for a person (at most "
                f"{self.per_client} at once over all its sessions: "
                "approvals.max_pending_per_client)"
            )
        return None

    def count(self) -> int:
        with self._lock:
            return len(self._asks)

    @contextlib.contextmanager
    def holding(self, ask: Ask, session: str, client: str) -> Iterator[None]:
        with self._lock:
            self._asks[ask] = (session, client)
        try:
            yield
        finally:
            with self._lock:
                self._asks.pop(ask, None)

    def withdraw(self, why: str, session: str | None = None) -> int:
        """Withdraw the asks of ``session`` (every ask when None); how many."""
        with self._lock:
            gone = [a for a, (s, _) in self._asks.items() if session is None or s == session]
        for ask in gone:
            ask.withdraw(why)
        return len(gone)


async def wait_for(ask: Ask, progress: Progress | None) -> None:
    """Until ``ask`` is answered, times out or is withdrawn, telling the caller now and
    then where it waits ("waiting for a person at ..., 4:55 left"; clients that honour
    progress do not time out meanwhile). An ask nobody can answer any more (the dashboard
    that could went away) is withdrawn at once instead of waiting out its time."""
    next_look = time.monotonic() + PROGRESS_EVERY
    await _note(ask, progress)
    while not ask.done():
        await anyio.sleep(POLL)
        if time.monotonic() >= next_look and not ask.done():
            next_look = time.monotonic() + PROGRESS_EVERY
            if not await anyio.to_thread.run_sync(ask.reachable):
                ask.withdraw("nobody can answer it any more (its approval channels went away)")
                return
            await _note(ask, progress)


async def _note(ask: Ask, progress: Progress | None) -> None:
    if progress is None:
        return
    left = ask.left()
    message = (
        f"waiting for a person to approve at {ask.where()}, "
        f"{int(left) // 60}:{int(left) % 60:02d} left"
    )
    with contextlib.suppress(Exception):  # a client that cannot take it still waits
        await progress(ask.timeout - left, ask.timeout, message)
