"""The client side of the exec server (`agentvisor.execserver`): hand ``exec`` to a running
gateway. Imports only what a socket needs, so the CLI starts in a few milliseconds; any
trouble reaching the gateway means "no gateway" and the CLI runs the command itself.

It uses the C modules `_socket` and `_signal` directly: the public `socket` and `signal`
wrap them in enums, and importing `enum` costs more than everything else here."""

from __future__ import annotations

import _signal as signal
import _socket as socket
import os
import sys

from ... import execproto

# fds 0, 1, 2 as the C ints SCM_RIGHTS carries (no `array` import: it pulls in collections).
_STDIO_FDS = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
# Options that print or inspect instead of running: always handled in-process.
_LOCAL_ONLY = {"-h", "--help", "--dry-run"}


def via_gateway(argv: list[str]) -> int | None:
    """The command's exit status, or None when no gateway took it."""
    head = argv[: argv.index("--")] if "--" in argv else argv
    if _LOCAL_ONLY & set(head) or os.environ.get("AGENTVISOR_NO_GATEWAY"):
        return None
    path = execproto.socket_path(os.environ)
    if not os.path.exists(path):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(path)
        request = execproto.encode_request(argv, os.getcwd(), dict(os.environ))
        conn.sendmsg([request], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, _STDIO_FDS)])
    except OSError:
        conn.close()
        return None
    return _wait(conn)


def _wait(conn: socket.socket) -> int | None:
    def forward(signum: int, frame: object) -> None:
        try:
            conn.send(b"K")
        except OSError:
            return

    previous = {
        signum: signal.signal(signum, forward)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    while True:
        try:
            data = conn.recv(1 << 20)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            sys.stderr.write("agentvisor: the gateway ended the run without a status\n")
            return 125
        kind, text = data[:1], data[1:].decode("utf-8", "surrogateescape")
        if kind == b"S":
            sys.stderr.write(text + "\n")
            sys.stderr.flush()
        elif kind == b"E":
            return int(text)
        elif kind == b"F":  # the server has no one to ask, or speaks another version
            conn.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            return None
