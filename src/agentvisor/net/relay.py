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
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import socket
import sys
import threading
import time

BUFFER = 1024 * 1024


def pump(src: socket.socket, dst: socket.socket) -> None:
    """Copy until src ends, then half-close dst. Both sockets must be blocking."""
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


def handle(client: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
    back.start()
    pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def watch(pidfd: int | None, pid: int) -> None:
    """Exit the relay when the command has exited."""
    if pidfd is not None:
        select.select([pidfd], [], [])
    else:
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            except PermissionError:
                pass
            time.sleep(0.2)
    os._exit(0)


def serve(server: socket.socket, path: str, pidfd: int | None, pid: int) -> None:
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    threading.Thread(target=watch, args=(pidfd, pid), daemon=True).start()
    while True:
        try:
            client, _ = server.accept()
        except OSError:
            continue
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handle, args=(client, path), daemon=True).start()


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
    server = socket.create_server((host, port), backlog=256)
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
