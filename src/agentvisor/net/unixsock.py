"""Listening Unix sockets for agentvisor's own services (the exec server, the egress proxy)."""

from __future__ import annotations

import contextlib
import os
import select
import socket


def listen(path: str, kind: int, backlog: int) -> socket.socket:
    """A listening socket at ``path`` that only this user may connect to (mode 0600)."""
    server = socket.socket(socket.AF_UNIX, kind)
    server.bind(path)
    os.chmod(path, 0o600)
    server.listen(backlog)
    return server


def close(server: socket.socket) -> None:
    """Stop listening; a thread blocked in accept() wakes up with an error."""
    with contextlib.suppress(OSError):
        server.shutdown(socket.SHUT_RDWR)
    server.close()


def hung_up(sock: socket.socket) -> bool:
    """Whether the peer of a connected ``sock`` has closed or half-closed its end (or the
    socket is closed here): how a service sees that the caller it waits for went away.
    One poll(2) with POLLRDHUP: data still unread does not count as gone."""
    if sock.fileno() < 0:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLRDHUP)
    return bool(poller.poll(0))
