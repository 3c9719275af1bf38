"""Asks that wait for a person without holding a shared worker, bounded, bound to their caller.

A call whose action needs a person waits in the front end's event loop (`wait_for` polls
the ask), so 100 pending asks hold no worker thread and other sessions' calls keep their
speed. An ask raised outside the MCP pipeline waits in its caller's own thread
(`wait_in_thread`): an egress-proxy connection's, a running call's (never one of the
event loop's shared pool, see `Gateway.call_async`), an ``agentvisor exec`` client's in
the exec server. Each session and each client (the caller's token or address) may have
only so many asks pending: over the cap the next ask is denied at once with a reason, so
one agent cannot queue asks without end. An ask belongs to its caller: when the request
is cancelled, the client disconnects (a proxy client or an exec CLI closed or killed),
the session closes or the gateway stops, the ask is withdrawn (recorded as such) and a
later answer runs nothing.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Awaitable, Callable

import anyio

from ..approvals.broker import Ask

POLL = 0.1  # seconds between looks at a pending ask (an answer is seen this fast)
# Seconds between looks whether a thread's caller went away: an answer or a withdrawal
# wakes the thread at once, so this only bounds how late a disconnect is noticed.
GONE_EVERY = 0.5
PROGRESS_EVERY = 5.0  # seconds between MCP progress notifications while an ask waits

# progress(done, total, message): an MCP progress notification to the caller.
Progress = Callable[[float, float, str], Awaitable[None]]
# Whether the caller of an ask waiting in a thread has gone away (it is then withdrawn).
Gone = Callable[[], bool]


class OpenAsks:
    """The asks a gateway's sessions wait on: counted for the caps, withdrawn with them.

    The caps are ``approvals.max_pending_per_session`` and ``approvals.max_pending_per_client``:
    over either, the next ask is denied (rule ``gateway:ask-limit``), naming the key."""

    def __init__(self, per_session: int, per_client: int) -> None:
        self.per_session = per_session
        self.per_client = per_client
        self._lock = threading.Lock()
        self._places: dict[Place, tuple[str, str]] = {}  # place -> (session id, client)

    def reserve(self, session: str, client: str) -> Place | str:
        """A place for one more ask of this session and client, or why there is none
        (rule ``gateway:ask-limit``). Counted and taken under one lock: asks raised at
        the same moment cannot all pass the count before any of them is opened."""
        with self._lock:
            owners = list(self._places.values())
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
            place = Place(self)
            self._places[place] = (session, client)
            return place

    def count(self) -> int:
        """The asks open now (places taken for asks not yet opened do not count)."""
        with self._lock:
            return sum(1 for place in self._places if place.ask is not None)

    def withdraw(self, why: str, session: str | None = None) -> int:
        """Withdraw the asks of ``session`` (every ask when None); how many."""
        with self._lock:
            places = [p for p, (s, _) in self._places.items() if session is None or s == session]
            for place in places:  # one still being opened is withdrawn once it is
                place.withdrawn = why
            gone = [p.ask for p in places if p.ask is not None]
        for ask in gone:
            ask.withdraw(why)
        return len(gone)

    def _release(self, place: Place) -> None:
        with self._lock:
            self._places.pop(place, None)


class Place:
    """One ask's place under the caps: taken before the ask is opened (`OpenAsks.reserve`),
    given back when the ``with`` block that waits for it ends."""

    def __init__(self, owner: OpenAsks) -> None:
        self.owner = owner
        self.ask: Ask | None = None  # set once opened: from then on it can be withdrawn
        self.withdrawn: str | None = None  # why, when withdrawn before it was opened

    def opened(self, ask: Ask) -> None:
        """``ask`` was opened for this place; withdrawn at once if its session closed or
        the gateway stopped while it was being opened."""
        with self.owner._lock:
            self.ask = ask
            why = self.withdrawn
        if why is not None:
            ask.withdraw(why)

    def __enter__(self) -> Place:
        return self

    def __exit__(self, *exc: object) -> None:
        self.owner._release(self)


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


def wait_in_thread(ask: Ask, gone: Gone) -> None:
    """`wait_for` in the caller's own thread: until ``ask`` is answered, times out or is
    withdrawn; withdrawn as soon as ``gone()`` says its caller went away, or when nobody
    can answer it any more."""
    next_look = time.monotonic() + PROGRESS_EVERY
    while not ask.done():
        ask.pending.wait(min(GONE_EVERY, ask.left()))
        if gone():
            ask.withdraw("its caller went away (disconnected or cancelled)")
            return
        if time.monotonic() >= next_look and not ask.done():
            next_look = time.monotonic() + PROGRESS_EVERY
            if not ask.reachable():
                ask.withdraw("nobody can answer it any more (its approval channels went away)")
                return


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
