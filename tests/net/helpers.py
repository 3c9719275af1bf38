"""Helpers for the network tests: loopback HTTP servers, a fake resolver, a test policy.

Nothing here sends a packet anywhere but 127.0.0.0/8: "public" addresses come only from
injected resolvers, and `LoopbackOnlyDialer` refuses (without touching the network) any
address outside loopback that a test might make the guard dial.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from agentvisor.actions import Action, Context, Decision
from agentvisor.net.guard import system_dialer

SHARED = Path(__file__).resolve().parents[3] / "shared"
PUBLIC_IP = "93.184.215.14"  # never dialed: LoopbackOnlyDialer refuses it


class _HTTPServer(ThreadingHTTPServer):
    request_queue_size = 1024  # the default 5 drops connections in the concurrency tests


class Server:
    """A threaded HTTP server on 127.0.0.1 with a few routes tests use."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.requests: list[dict[str, Any]] = []
        self.connections = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def setup(self) -> None:
                owner.connections += 1
                super().setup()

            def do_GET(self) -> None:
                self._route()

            do_POST = do_PUT = do_DELETE = do_HEAD = do_GET

            def _route(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else b""
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                owner.requests.append(
                    {
                        "method": self.command,
                        "path": self.path,
                        "headers": dict(self.headers.items()),
                        "body": body,
                    }
                )
                name = parts.path.strip("/").replace("/", "_") or "index"
                route = getattr(owner, "route_" + name, None)
                if route is None:
                    return self._send(404, b"not found", "text/plain")
                route(self, query, body)

            def _send(
                self, status: int, body: bytes, ctype: str, headers: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

        self.httpd = _HTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.scheme = "https" if tls else "http"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def url(self, path: str = "/", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    # routes: route_<path>(handler, query, body)
    def route_index(self, h: Any, q: dict[str, str], body: bytes) -> None:
        h._send(200, b"hello from the test server\n", "text/plain; charset=utf-8")

    def route_html(self, h: Any, q: dict[str, str], body: bytes) -> None:
        page = (
            "<!doctype html><html><head><title>Test page</title></head><body>"
            "<nav>Home | About | Contact</nav><article><h1>The heading</h1>"
            "<p>This is the first paragraph of the article, long enough to count as "
            "main content for the extractor to keep it.</p><p>A second paragraph with a "
            "<a href='https://example.org/'>link</a> and more words to read.</p>"
            "</article><footer>Copyright</footer></body></html>"
        )
        h._send(200, page.encode(), "text/html; charset=utf-8")

    def route_json(self, h: Any, q: dict[str, str], body: bytes) -> None:
        h._send(200, b'{"ok": true}', "application/json")

    def route_binary(self, h: Any, q: dict[str, str], body: bytes) -> None:
        h._send(200, b"\x89PNG\r\n\x1a\n\0\0\0" + bytes(range(256)), "image/png")

    def route_big(self, h: Any, q: dict[str, str], body: bytes) -> None:
        h._send(200, b"x" * int(q.get("n", "100000")), "text/plain")

    def route_redirect(self, h: Any, q: dict[str, str], body: bytes) -> None:
        h._send(int(q.get("status", "302")), b"", "text/plain", {"Location": q["to"]})

    def route_loop(self, h: Any, q: dict[str, str], body: bytes) -> None:
        n, stop = int(q.get("n", "0")), int(q.get("stop", "1000"))
        if n >= stop:
            return h._send(200, f"after {n} redirects".encode(), "text/plain")
        h._send(302, b"", "text/plain", {"Location": f"/loop?n={n + 1}&stop={stop}"})

    def route_echo(self, h: Any, q: dict[str, str], body: bytes) -> None:
        data = {
            "method": h.command,
            "path": h.path,
            "headers": dict(h.headers.items()),
            "body": body.decode("utf-8", "replace"),
        }
        h._send(200, json.dumps(data).encode(), "application/json")

    def route_echo_encoded(self, h: Any, q: dict[str, str], body: bytes) -> None:
        """Echoes the Authorization header raw, base64-encoded and URL-encoded."""
        from urllib.parse import quote

        value = h.headers.get("authorization", "").removeprefix("Bearer ")
        text = (
            f"raw={value}\nb64={base64.b64encode(value.encode()).decode()}\n"
            f"url={quote(value, safe='')}\n"
        )
        h._send(200, text.encode(), "text/plain", {"X-Echo": value})

    def route_echo_forms(self, h: Any, q: dict[str, str], body: bytes) -> None:
        """Echoes the request body in the encoding ``q["form"]`` names, as a page would."""
        import html
        from urllib.parse import quote_plus

        value = body.decode("utf-8")
        forms = {
            "pct-lower": lambda: "".join(f"%{b:02x}" for b in value.encode()),
            "pct-mixed": lambda: "".join(
                f"%{b:02x}" if i % 2 else f"%{b:02X}" for i, b in enumerate(value.encode())
            ),
            "plus": lambda: quote_plus(value),
            "json-u": lambda: json.dumps(value, ensure_ascii=True)[1:-1],
            "json-u-all": lambda: "".join(f"\\u{ord(c):04x}" for c in value),
            "html-named": lambda: html.escape(value),
            "html-decimal": lambda: "".join(f"&#{ord(c)};" for c in value),
            "html-hex": lambda: "".join(f"&#x{ord(c):X};" for c in value),
        }
        text = f"<p>{forms[q['form']]()}</p>"
        h._send(200, text.encode(), "text/plain; charset=utf-8")

    def route_unknown_charset(self, h: Any, q: dict[str, str], body: bytes) -> None:
        ctype = f"{q.get('type', 'text/html')}; charset={q.get('charset', 'x-no-such-charset')}"
        h._send(200, "<html><body><p>caf\u00e9 ok</p></body></html>".encode(), ctype)

    def route_slow(self, h: Any, q: dict[str, str], body: bytes) -> None:
        import time

        h.send_response(200)
        h.send_header("Content-Type", "text/plain")
        h.send_header("Content-Length", "1000")
        h.end_headers()
        for _ in range(1000):
            h.wfile.write(b"x")
            h.wfile.flush()
            time.sleep(0.05)


class LoopbackOnlyDialer:
    """Dials loopback for real; records and refuses every other address."""

    def __init__(self) -> None:
        self.dialed: list[tuple[str, int]] = []

    def __call__(self, address: str, port: int, timeout: float) -> socket.socket:
        self.dialed.append((address, port))
        if not ipaddress.ip_address(address).is_loopback:
            raise ConnectionRefusedError(111, "test dialer: not loopback, not dialed")
        return system_dialer(address, port, timeout)


class TableResolver:
    """Answers from a table; unknown names resolve to a public address (never dialed)."""

    def __init__(self, table: dict[str, list[str]] | None = None) -> None:
        self.table = table or {}
        self.calls: list[str] = []

    def __call__(self, host: str, port: int) -> list[str]:
        self.calls.append(host)
        answer = self.table.get(host, [PUBLIC_IP])
        if callable(answer):
            return answer()
        return list(answer)


class RulesPolicy:
    """A stand-in with the policy engine's documented fetch defaults and exact host rules."""

    def __init__(
        self, allow: set[str] = frozenset(), deny: set[str] = frozenset(), secrets: bool = True
    ) -> None:
        self.allow, self.deny, self.secrets = set(allow), set(deny), secrets
        self.asked: list[Action] = []

    @staticmethod
    def _hostport(action: Action) -> str:
        from agentvisor.net.guard import parse_hostport, parse_url

        t = parse_url(action.target) if "://" in action.target else parse_hostport(action.target)
        return t.hostport

    def decide(self, action: Action, context: Context) -> Decision:
        if action.kind == "secret":
            return Decision("allow" if self.secrets else "deny", "test secret rule")
        hostport = self._hostport(action)
        if hostport in self.deny:
            return Decision("deny", f"test rule denies {hostport}", rule="test:deny")
        if hostport in self.allow:
            return Decision("allow", f"test rule allows {hostport}", rule="test:allow")
        if context.tool == "web_extract" and action.method == "GET":
            return Decision("allow", "web_extract may GET public pages", rule="default:fetch")
        if context.tool == "proxy":
            return Decision("deny", "the proxy reaches only allowed hosts", rule="default:proxy")
        self.asked.append(action)
        return Decision("ask", "no rule allows this fetch", rule="default:fetch")

    def allows_exact_host(self, host: str, port: int, context: Context) -> Decision | None:
        from agentvisor.net.guard import Target

        hostport = Target("http", host, port).hostport
        if hostport in self.allow and hostport not in self.deny:
            return Decision("allow", f"test rule allows {hostport}", rule="test:allow")
        return None


def make_access(
    allow: set[str] = frozenset(),
    *,
    resolver: Callable | None = None,
    dialer: Callable | None = None,
    **kw: Any,
) -> Any:
    from agentvisor.net.access import NetworkAccess
    from agentvisor.net.guard import Guard

    guard = Guard(resolver=resolver or TableResolver(), dialer=dialer or LoopbackOnlyDialer())
    return NetworkAccess(RulesPolicy(allow, **kw), guard)
