"""The live feed: one watcher thread turns changes of the approval queue and new audit
events into server-sent events for every open dashboard.

    event: approvals   data: {"pending": [ask, ...]}            the whole list, on change
    event: settled     data: {"id", "status", "outcome", "answer"}   an ask left the list
    event: audit       data: an audit event                        one per new event
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator
from typing import Any

from . import views

KEEPALIVE = 15.0
_QUEUE_LIMIT = 1000  # a client this far behind is dropped; its browser reconnects


class Feed:
    def __init__(self, state: Any) -> None:
        self.state = state
        self._subscribers: dict[asyncio.Queue[str | None], asyncio.AbstractEventLoop] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, daemon=True, name="agentvisor-dashboard-feed"
        )

    def start(self) -> Feed:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            subscribers = list(self._subscribers.items())
        for queue, loop in subscribers:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(queue.put_nowait, None)
        if self._thread.is_alive():
            self._thread.join(5)

    # -- the watcher ------------------------------------------------------------------

    def _watch(self) -> None:
        approvals, audit = self.state.approvals, self.state.audit
        last_seq = audit.latest_seq()
        pending: dict[str, Any] = {}
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a failed round is retried, never fatal
                now = {ask.id: ask for ask in approvals.pending()}
                if now.keys() != pending.keys():
                    self.publish("approvals", {"pending": [views.ask(a) for a in now.values()]})
                    for gone in pending.keys() - now.keys():
                        ask = approvals.get(gone)
                        if ask is not None:
                            self.publish("settled", views.settled(ask))
                pending = now
                for event in audit.events(after_seq=last_seq, limit=500):
                    data = views.event(event)
                    last_seq = max(last_seq, data.get("seq") or last_seq)
                    self.publish("audit", data)
            approvals.wait_for_change(0.5)

    def publish(self, kind: str, data: dict[str, Any]) -> None:
        message = f"event: {kind}\ndata: {json.dumps(data, default=str)}\n\n"
        with self._lock:
            subscribers = list(self._subscribers.items())
        for queue, loop in subscribers:
            with contextlib.suppress(RuntimeError):  # that loop has closed
                loop.call_soon_threadsafe(self._offer, queue, message)

    def _offer(self, queue: asyncio.Queue[str | None], message: str) -> None:
        if queue.qsize() >= _QUEUE_LIMIT:
            queue.put_nowait(None)
        else:
            queue.put_nowait(message)

    # -- one browser ------------------------------------------------------------------

    async def stream(self) -> AsyncIterator[str]:
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        with self._lock:
            self._subscribers[queue] = asyncio.get_running_loop()
        try:
            yield "retry: 2000\n\n"
            while not self._stop.is_set():
                try:
                    message = await asyncio.wait_for(queue.get(), KEEPALIVE)
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                if message is None:
                    return
                yield message
        finally:
            with self._lock:
                self._subscribers.pop(queue, None)
