"""The relay that runs inside a ``--network proxy`` sandbox (standalone, stdlib only).

    python3 -I -S relay.py --listen 127.0.0.1:PORT --socket /run/agentvisor/proxy.sock -- CMD...

The sandbox has only loopback. The relay listens on 127.0.0.1:PORT there and copies
each connection to the egress proxy's Unix socket, which is bind-mounted from the
host; then it ``exec``s CMD, so CMD keeps the relay's pid, exit status and signals.
The listening socket is bound before CMD starts, so CMD can connect at once.

The relay serves from a grandchild (not a child of CMD, so CMD never reaps or waits
for it), with stdio on /dev/null (so it never holds CMD's output pipes open), and it
exits as soon as CMD exits (a pidfd on CMD's pid; the sandbox's pid namespace kills
it too). It makes no decisions: the proxy on the host checks every destination.

It is one thread with one selector (`Relay`): the sandbox's pid limit counts threads,
and a thread or two per connection ran out at about a hundred connections. It serves as
many connections as its open-file limit allows (at most `MAX_CONNECTIONS`) with bounded
buffers per direction, and answers any beyond with ``503 Service Unavailable``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import selectors
import signal
import socket
import sys

BUFFER = 1024 * 1024


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy until src ends, then half-close dst. Both sockets must be blocking (the
    host-side proxy's tunnels use this; the relay has its own event loop)."""
    try:
        copy(src, dst)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


def copy(src: socket.socket, dst: socket.socket, limit: int | None = None) -> int:
    """Move bytes from src to dst (all of them, or ``limit``); returns the count.

    splice(2) through a pipe moves them inside the kernel, without copying into Python;
    where splice is unavailable (or refused) a plain recv/send loop does the same.
    """
    moved = 0
    if hasattr(os, "splice"):
        try:
            moved = _splice(src, dst, limit)
            return moved
        except _NoSplice:
            pass
    buffer = bytearray(BUFFER)
    view = memoryview(buffer)
    while limit is None or moved < limit:
        want = BUFFER if limit is None else min(BUFFER, limit - moved)
        count = src.recv_into(buffer, want)
        if not count:
            break
        dst.sendall(view[:count])
        moved += count
    return moved


class _NoSplice(Exception):
    pass


def _splice(src: socket.socket, dst: socket.socket, limit: int | None) -> int:
    read_end, write_end = os.pipe()
    moved = 0
    try:
        try:
            import fcntl

            fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, BUFFER)
        except (ImportError, AttributeError, OSError):
            pass
        while limit is None or moved < limit:
            want = BUFFER if limit is None else min(BUFFER, limit - moved)
            try:
                count = os.splice(src.fileno(), write_end, want)
            except OSError as exc:
                if moved == 0 and exc.errno in (errno.EINVAL, errno.ENOSYS, errno.EPERM):
                    raise _NoSplice from None
                raise
            if not count:
                break
            left = count
            while left:
                left -= os.splice(read_end, dst.fileno(), left)
            moved += count
        return moved
    finally:
        os.close(read_end)
        os.close(write_end)


# Bytes read ahead per direction before reading pauses for the writer (backpressure).
MAX_PENDING = 256 * 1024
CHUNK = 256 * 1024
# Connections served at once when the fd limit allows; beyond, new ones get a 503.
MAX_CONNECTIONS = 1024
_FDS_PER_CONNECTION = 2
CONNECT_TIMEOUT = 10.0
_FDS_RESERVED = 64  # stdio, the selector, the pidfd, and room to accept and refuse


def connection_limit() -> int:
    """How many connections fit in this process's open-file limit (two fds each)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY:
        return MAX_CONNECTIONS
    return max(1, min(MAX_CONNECTIONS, (soft - _FDS_RESERVED) // _FDS_PER_CONNECTION))


def refusal(reason: str) -> bytes:
    body = f"agentvisor relay: {reason}\n".encode()
    return (
        b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Content-Length: %d\r\nConnection: close\r\nX-Agentvisor-Rule: relay:capacity\r\n"
        b"X-Agentvisor-Reason: %s\r\n\r\n%s" % (len(body), reason.encode(), body)
    )


class Flow:
    """One direction of a relayed connection: bytes read from ``src`` wait in ``pending``
    until ``dst`` takes them; the end of ``src`` becomes a half-close of ``dst``."""

    def __init__(self, src: socket.socket, dst: socket.socket) -> None:
        self.src = src
        self.dst = dst
        self.pending = bytearray()
        self.ended = False  # src sent everything
        self.done = False  # ... and dst was told (shutdown for writing)

    @property
    def wants_read(self) -> bool:
        return not self.ended and len(self.pending) < MAX_PENDING

    def read(self) -> None:
        try:
            data = self.src.recv(CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            self.ended = True
        elif self.pending:
            self.pending += data
        else:  # the usual case: the writer is ready, so skip the buffer
            self.pending += data[self._send(data) :]
        self._finish()

    def write(self) -> None:
        if self.pending:
            del self.pending[: self._send(self.pending)]
        self._finish()

    def _send(self, data: bytes | bytearray) -> int:
        try:
            return self.dst.send(data)
        except (BlockingIOError, InterruptedError):
            return 0

    def _finish(self) -> None:
        if self.ended and not self.pending and not self.done:
            self.done = True
            with contextlib.suppress(OSError):
                self.dst.shutdown(socket.SHUT_WR)


class Link:
    """A client connection and its connection to the proxy, served by the event loop."""

    def __init__(self, relay: Relay, client: socket.socket, upstream: socket.socket) -> None:
        self.relay = relay
        self.sockets = (client, upstream)
        self.flows = (Flow(client, upstream), Flow(upstream, client))
        self.events = {client: 0, upstream: 0}

    def ready(self, sock: socket.socket, mask: int) -> None:
        try:
            for flow in self.flows:
                if mask & selectors.EVENT_READ and flow.src is sock:
                    flow.read()
                if mask & selectors.EVENT_WRITE and flow.dst is sock:
                    flow.write()
        except OSError:
            self.close()
            return
        if all(flow.done for flow in self.flows):
            self.close()
        else:
            self.update()

    def update(self) -> None:
        """Listen for what each socket can do next: read while there is room, write
        while bytes wait for it."""
        for sock in self.sockets:
            events = 0
            for flow in self.flows:
                if flow.src is sock and flow.wants_read:
                    events |= selectors.EVENT_READ
                if flow.dst is sock and flow.pending:
                    events |= selectors.EVENT_WRITE
            if events != self.events[sock]:
                self.relay.listen(sock, events, self.events[sock], self)
                self.events[sock] = events

    def close(self) -> None:
        for sock in self.sockets:
            if self.events[sock]:
                self.relay.selector.unregister(sock)
                self.events[sock] = 0
            sock.close()
        self.relay.links.discard(self)


class Relay:
    """One thread, one selector: any number of connections up to ``limit`` (the sandbox's
    pid limit would end a thread per connection at about a hundred); past it, a 503."""

    def __init__(
        self, server: socket.socket, path: str, limit: int, pidfd: int | None, pid: int
    ) -> None:
        self.server = server
        self.path = path
        self.limit = limit
        self.pidfd = pidfd
        self.pid = pid
        self.selector = selectors.DefaultSelector()
        self.links: set[Link] = set()

    def listen(self, sock: socket.socket, events: int, before: int, link: Link) -> None:
        if not events:
            self.selector.unregister(sock)
        elif not before:
            self.selector.register(sock, events, link)
        else:
            self.selector.modify(sock, events, link)

    def run(self) -> None:
        self.server.setblocking(False)
        self.selector.register(self.server, selectors.EVENT_READ, None)
        if self.pidfd is not None:  # readable when the command has exited
            self.selector.register(self.pidfd, selectors.EVENT_READ, "exit")
        while True:
            for key, mask in self.selector.select(None if self.pidfd is not None else 0.2):
                if key.data is None:
                    self.accept()
                elif key.data == "exit":
                    os._exit(0)
                else:
                    key.data.ready(key.fileobj, mask)
            if self.pidfd is None and not _alive(self.pid):
                os._exit(0)

    def accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # out of file descriptors: wait for a connection to end
                return
            if len(self.links) >= self.limit:
                self._refuse(client, f"more than {self.limit} connections at once; retry later")
                continue
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            # Blocking, briefly: a Unix socket's connect does not complete in the
            # background, and a burst can fill the proxy's backlog for a moment.
            upstream.settimeout(CONNECT_TIMEOUT)
            try:
                upstream.connect(self.path)
            except OSError as exc:
                upstream.close()
                why = exc.strerror or "timed out"
                self._refuse(client, f"the egress proxy is not reachable ({why})")
                continue
            upstream.setblocking(False)
            client.setblocking(False)
            with contextlib.suppress(OSError):
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            link = Link(self, client, upstream)
            self.links.add(link)
            link.update()

    @staticmethod
    def _refuse(client: socket.socket, reason: str) -> None:
        with contextlib.suppress(OSError):
            client.setblocking(False)
            client.send(refusal(reason))
        client.close()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def serve(server: socket.socket, path: str, pidfd: int | None, pid: int) -> None:
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    Relay(server, path, connection_limit(), pidfd, pid).run()


def parse(argv: list[str]) -> tuple[str, int, str, list[str]]:
    if "--" not in argv:
        raise SystemExit("usage: relay.py --listen HOST:PORT --socket PATH -- CMD...")
    split = argv.index("--")
    options, command = argv[:split], argv[split + 1 :]
    values = dict(zip(options[::2], options[1::2], strict=False))
    host, _, port = values.get("--listen", "").rpartition(":")
    if not host or not port.isdigit() or "--socket" not in values or not command:
        raise SystemExit("usage: relay.py --listen HOST:PORT --socket PATH -- CMD...")
    return host, int(port), values["--socket"], command


def main(argv: list[str]) -> None:
    host, port, path, command = parse(argv)
    server = socket.create_server((host, port), backlog=1024)
    pid = os.getpid()
    try:
        pidfd: int | None = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    child = os.fork()
    if child == 0:
        if os.fork() == 0:
            serve(server, path, pidfd, pid)
        os._exit(0)
    os.waitpid(child, 0)
    server.close()
    if pidfd is not None:
        os.close(pidfd)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        print(f"agentvisor relay: cannot run {command[0]}: {exc.strerror}", file=sys.stderr)
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
