"""HTTP/1.1 as the egress proxy reads and writes it: strict request heads, hop-by-hop
header removal, h11 events from a socket, and refusals with their reason.

Requests from a sandbox are hostile input, and the server behind the proxy may parse
differently from h11, so a head is read and checked here (`read_head`,
`framing_problem`) before h11 sees it, and only the framing h11 parsed is forwarded.
"""

from __future__ import annotations

import re
import socket
from typing import Any

BUFFER = 256 * 1024

# Request and response headers that belong to one connection, not to the message.
_HOP_BY_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"proxy-authorization",
        b"proxy-authenticate",
        b"te",
        b"trailer",
        b"upgrade",
    }
)
MAX_HEAD = 64 * 1024
# Request headers the proxy sets itself: framing is re-derived from what h11 parsed.
FRAMING = frozenset({b"content-length", b"transfer-encoding", b"expect"})
_HEAD_END = re.compile(rb"\r?\n\r?\n")


class BadHead(Exception):
    """The request head cannot be read: too large, or the client stopped mid-head."""


def read_head(client: socket.socket, pending: bytes) -> tuple[bytes | None, bytes]:
    """The next request head (through its blank line) and the bytes after it; None for
    the head when the client closed between requests."""
    buffer = pending.lstrip(b"\r\n")  # RFC 9112 2.2: empty lines before a request
    while True:
        end = _HEAD_END.search(buffer)
        if end is not None:
            return buffer[: end.end()], buffer[end.end() :]
        if len(buffer) > MAX_HEAD:
            raise BadHead(f"the request head is larger than {MAX_HEAD} bytes")
        data = client.recv(BUFFER)
        if not data:
            if buffer:
                raise BadHead("the connection ended inside a request head")
            return None, b""
        buffer = (buffer + data).lstrip(b"\r\n")


def framing_problem(head: bytes) -> str | None:
    """Why a request head is ambiguous (RFC 9112 sections 2.2, 5.2, 6.1, 6.3), or None.

    Each of these lets a proxy and the server behind it read a different number of
    requests from the same bytes (request smuggling), so none is forwarded."""
    if re.search(rb"(?<!\r)\n|\r(?!\n)", head):
        return "a bare CR or LF in the request head (lines must end in CRLF)"
    lines = head[:-4].split(b"\r\n")[1:]
    if any(line[:1] in (b" ", b"\t") for line in lines):
        return "obsolete line folding (a header line starting with whitespace)"
    lengths, codings = [], []
    for line in lines:
        name, _, value = line.partition(b":")
        name = name.lower()
        if name == b"content-length":
            lengths.append(value.strip(b" \t"))
        elif name == b"transfer-encoding":
            codings.append(value.strip(b" \t").lower())
    if lengths and codings:
        return "both Content-Length and Transfer-Encoding"
    if len(lengths) > 1:
        return "more than one Content-Length"
    if lengths and not re.fullmatch(rb"[0-9]{1,18}", lengths[0]):
        return f"invalid Content-Length {lengths[0][:40]!r}"
    if codings and codings != [b"chunked"]:
        return "Transfer-Encoding other than one 'chunked'"
    return None


def request_framing(headers: Any) -> list[tuple[bytes, bytes]]:
    """The one framing header of the request as h11 read it."""
    for name, value in headers:
        if name.lower() in (b"content-length", b"transfer-encoding"):
            return [(name.lower(), value)]
    return []


def end_to_end(headers: Any) -> list[tuple[bytes, bytes]]:
    named = {
        v.strip().lower()
        for name, value in headers
        if name.lower() == b"connection"
        for v in value.split(b",")
    }
    return [
        (name, value)
        for name, value in headers
        if name.lower() not in _HOP_BY_HOP and name.lower() not in named and name.lower() != b"host"
    ]


def next_request(sock: socket.socket, pending: bytes) -> tuple[Any, Any, bytes]:
    """The next request on ``sock``: (its h11 connection, the `h11.Request` or None, the
    bytes after its head). None when the client closed, or sent a head that is ambiguous
    (answered 400 here). One fresh h11 connection per request, fed only a head read strictly
    first: h11 is lenient (CL+TE, obs-fold, bare LF) where upstreams differ."""
    import h11

    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD)
    head, pending = read_head(sock, pending)
    if head is None:
        return conn, None, pending
    problem = framing_problem(head)
    if problem:
        send_error(conn, sock, 400, f"bad request: {problem}", "proxy:framing")
        return conn, None, pending
    conn.receive_data(head + pending)
    event = next_event(conn, sock)
    return conn, event if isinstance(event, h11.Request) else None, pending


def next_event(conn: Any, sock: socket.socket) -> Any:
    import h11

    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            conn.receive_data(sock.recv(BUFFER))
            continue
        if event is h11.PAUSED:
            return None
        return event


def _header_text(text: str) -> bytes:
    clean = "".join(c if 0x20 <= ord(c) < 0x7F else " " for c in text)
    return clean[:1000].encode("ascii")


def send_error(conn: Any, client: socket.socket, status: int, reason: str, rule: str) -> None:
    import h11

    body = f"agentvisor: {reason}\n".encode()
    try:
        client.sendall(
            conn.send(
                h11.Response(
                    status_code=status,
                    headers=[
                        (b"content-type", b"text/plain; charset=utf-8"),
                        (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close"),
                        (b"x-agentvisor-reason", _header_text(reason)),
                        (b"x-agentvisor-rule", _header_text(rule or "policy")),
                    ],
                )
            )
        )
        client.sendall(conn.send(h11.Data(data=body)))
        client.sendall(conn.send(h11.EndOfMessage()))
    except (OSError, h11.LocalProtocolError):
        pass
