"""The egress proxy and its relay, on the host (the sandbox test is test_proxy_sandbox.py)."""

from __future__ import annotations

import resource
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentvisor.net.proxy import EgressProxy
from agentvisor.net.relay import __file__ as RELAY

from .helpers import LoopbackOnlyDialer, Server, TableResolver, make_access


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Relayed:
    """A proxy plus the relay running on the host (as it would inside a sandbox)."""

    def __init__(self, proxy: EgressProxy, command: list[str], nofile: int | None = None) -> None:
        self.port = free_port()

        def limit_files() -> None:
            if nofile is not None:
                resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-I",
                "-S",
                RELAY,
                "--listen",
                f"127.0.0.1:{self.port}",
                "--socket",
                proxy.socket_path,
                "--",
                *command,
            ],
            preexec_fn=limit_files,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("relay did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@pytest.fixture
def proxied(server: Server, tls_server: Server) -> Iterator[tuple[EgressProxy, Relayed]]:
    resolver = TableResolver({"secure.test": ["127.0.0.1"], "denied.test": ["127.0.0.1"]})
    access = make_access(
        {f"127.0.0.1:{server.port}", f"secure.test:{tls_server.port}"},
        resolver=resolver,
        dialer=LoopbackOnlyDialer(),
    )
    with EgressProxy(access, timeout=10) as proxy:
        relay = Relayed(proxy, ["sleep", "60"])
        try:
            yield proxy, relay
        finally:
            relay.proc.kill()
            relay.proc.wait()


def client(relay: Relayed, verify: ssl.SSLContext | bool = False):
    import httpx

    return httpx.Client(proxy=relay.url, verify=verify, trust_env=False, timeout=10)


def test_socket_is_private(proxied) -> None:
    proxy, _ = proxied
    directory = Path(proxy.socket_path).parent
    assert directory.stat().st_mode & 0o777 == 0o700


def test_allowed_http_is_forwarded_with_keep_alive(proxied, server: Server) -> None:
    _, relay = proxied
    with client(relay) as c:
        for _ in range(3):
            response = c.get(server.url("/"))
            assert response.status_code == 200 and b"hello" in response.content
        echoed = c.post(
            server.url("/echo"), content=b"body bytes", headers={"Host": "evil.example"}
        ).json()
    assert echoed["body"] == "body bytes"
    headers = {k.lower(): v for k, v in echoed["headers"].items()}
    assert headers["host"] == f"127.0.0.1:{server.port}"  # rewritten to the admitted host
    assert server.connections == 1  # one upstream connection served all four requests


def test_allowed_https_goes_through_connect(proxied, tls_server: Server, client_ssl) -> None:
    _, relay = proxied
    with client(relay, client_ssl) as c:
        response = c.get(tls_server.url("/", host="secure.test"))
    assert response.status_code == 200 and b"hello" in response.content


def test_denied_destinations_get_403_with_a_reason(
    proxied, server: Server, tls_server: Server
) -> None:
    _, relay = proxied
    other = Server()
    try:
        with client(relay) as c:
            response = c.get(other.url("/"))
        assert response.status_code == 403
        assert "internal destination" in response.headers["x-agentvisor-reason"]
        assert response.headers["x-agentvisor-rule"] == "guard:internal"
        assert other.connections == 0
        import httpx

        with client(relay) as c, pytest.raises(httpx.ProxyError, match="403"):
            c.get(f"https://denied.test:{tls_server.port}/")
    finally:
        other.close()


def test_connect_to_a_denied_port_is_refused_raw(proxied) -> None:
    _, relay = proxied
    with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as s:
        s.sendall(b"CONNECT 169.254.169.254:80 HTTP/1.1\r\nHost: 169.254.169.254:80\r\n\r\n")
        reply = s.recv(4096)
    assert reply.startswith(b"HTTP/1.1 403")
    assert b"metadata" in reply


def test_origin_form_and_https_absolute_requests_are_refused(proxied) -> None:
    _, relay = proxied
    for request in (
        b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
        b"GET https://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n",
    ):
        with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as s:
            s.sendall(request)
            assert s.recv(4096).startswith(b"HTTP/1.1 400")


def test_relay_exits_with_the_command(proxied) -> None:
    proxy, _ = proxied
    relay = Relayed(proxy, [sys.executable, "-c", "import time; time.sleep(0.5)"])
    assert relay.proc.wait(timeout=10) == 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", relay.port), timeout=1).close()
        except OSError:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the relay outlived its command")


def test_relay_keeps_the_command_status_and_output(proxied) -> None:
    proxy, _ = proxied
    port = free_port()
    done = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            RELAY,
            "--listen",
            f"127.0.0.1:{port}",
            "--socket",
            proxy.socket_path,
            "--",
            "sh",
            "-c",
            "echo out; exit 3",
        ],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert (done.returncode, done.stdout) == (3, "out\n")


def test_stop_removes_the_socket_directory(server: Server) -> None:
    proxy = EgressProxy(make_access()).start()
    directory = Path(proxy.socket_path).parent
    proxy.stop()
    assert not directory.exists()


def test_expect_continue_is_answered_by_the_proxy(proxied, server: Server) -> None:
    _, relay = proxied
    body = b"x" * 5000
    with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as s:
        s.sendall(
            f"POST {server.url('/echo')} HTTP/1.1\r\nHost: a\r\nContent-Length: "
            f"{len(body)}\r\nExpect: 100-continue\r\n\r\n".encode()
        )
        assert s.recv(4096).startswith(b"HTTP/1.1 100")
        s.sendall(body)
        reply = b""
        while b'"body"' not in reply:
            reply += s.recv(65536)
    assert reply.startswith(b"HTTP/1.1 200") and body in reply


def test_large_bodies_arrive_whole_through_both_paths(proxied, server: Server) -> None:
    _, relay = proxied
    size = 3 * 1024 * 1024 + 17  # above the size that is spliced past h11
    with client(relay) as c:
        assert len(c.get(server.url(f"/big?n={size}")).content) == size
        assert c.get(server.url("/")).status_code == 200  # the client reconnects after it
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", relay.port, timeout=10)
    conn.set_tunnel("127.0.0.1", server.port)
    conn.request("GET", f"/big?n={size}")
    assert len(conn.getresponse().read()) == size
    conn.close()


# --- request smuggling: one normalised request per parsed request -------------------------


def _exchange(relay: Relayed, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
    return reply


SMUGGLED = b"PUT /smuggled HTTP/1.1\r\nHost: elsewhere.example\r\nContent-Length: 0\r\n\r\n"
# What an upstream that counts Content-Length reads as the body: the chunk-size line.
SIZE_LINE = len(b"%x\r\n" % len(SMUGGLED))


def _smuggling_request(server: Server, framing: bytes) -> bytes:
    """A POST whose chunked body is, to an upstream that counts Content-Length, the
    chunk-size line followed by a second request: a PUT for another host."""
    body = b"%x\r\n%s\r\n0\r\n\r\n" % (len(SMUGGLED), SMUGGLED)
    return f"POST {server.url('/echo')} HTTP/1.1\r\nHost: a\r\n".encode() + framing + b"\r\n" + body


def test_content_length_beside_chunked_is_refused_not_smuggled(proxied, server: Server) -> None:
    _, relay = proxied
    framing = b"Content-Length: %d\r\nTransfer-Encoding: chunked\r\n" % SIZE_LINE
    reply = _exchange(relay, _smuggling_request(server, framing))
    assert [r["method"] for r in server.requests] == []  # before: POST, then PUT /smuggled
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    assert b"Content-Length and Transfer-Encoding" in reply


def test_a_chunked_request_is_forwarded_with_its_framing_only(proxied, server: Server) -> None:
    """Control: the same body, chunked alone, reaches the upstream as one request whose
    headers carry only the framing the proxy parsed."""
    _, relay = proxied
    reply = _exchange(relay, _smuggling_request(server, b"Transfer-Encoding: chunked\r\n"))
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    first = server.requests[0]
    headers = {k.lower() for k in first["headers"]}
    assert first["method"] == "POST"
    assert "transfer-encoding" in headers and "content-length" not in headers


@pytest.mark.parametrize(
    "head, problem",
    [
        (b"Content-Length: 4\r\nContent-Length: 4\r\n", b"more than one Content-Length"),
        (b"Content-Length: 4, 4\r\n", b"invalid Content-Length"),
        (b"Content-Length: +4\r\n", b"invalid Content-Length"),
        (b"Content-Length: 4\r\nX-Folded: a\r\n b\r\n", b"obsolete line folding"),
        (b"Content-Length: 4\nX-Bare: lf\r\n", b"bare CR or LF"),
        (b"Content-Length: 4\r\nX-Bare: c\rr\r\n", b"bare CR or LF"),
        (b"Transfer-Encoding: gzip, chunked\r\n", b"Transfer-Encoding other than"),
    ],
)
def test_ambiguous_framing_gets_400(proxied, server: Server, head: bytes, problem: bytes) -> None:
    _, relay = proxied
    request = f"POST {server.url('/echo')} HTTP/1.1\r\nHost: a\r\n".encode() + head + b"\r\nbody"
    reply = _exchange(relay, request)
    assert reply.startswith(b"HTTP/1.1 400") and problem in reply, reply[:300]
    assert server.requests == []
    # Control: the plain form of the same request goes through.
    plain = f"POST {server.url('/echo')} HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\nbody"
    assert _exchange(relay, plain.encode()).startswith(b"HTTP/1.1 200")


def test_each_keep_alive_request_is_admitted_on_its_own(proxied, server: Server) -> None:
    _, relay = proxied
    other = Server()
    try:
        pipelined = (
            f"GET {server.url('/')} HTTP/1.1\r\nHost: a\r\n\r\n"
            f"GET {other.url('/')} HTTP/1.1\r\nHost: a\r\n\r\n"
        ).encode()
        reply = _exchange(relay, pipelined)
        assert reply.startswith(b"HTTP/1.1 200")
        assert b"HTTP/1.1 403" in reply and b"internal destination" in reply
        assert other.connections == 0
    finally:
        other.close()


def test_connections_beyond_the_relay_limit_get_503_and_the_relay_lives_on(
    proxied, server: Server
) -> None:
    proxy, _ = proxied
    from agentvisor.net import relay as relay_module

    limit = 10
    nofile = relay_module._FDS_RESERVED + relay_module._FDS_PER_CONNECTION * limit
    relay = Relayed(proxy, ["sleep", "60"], nofile=nofile)
    request = f"GET {server.url('/')} HTTP/1.1\r\nHost: a\r\n\r\n".encode()
    held = []
    try:
        for _ in range(limit):
            s = socket.create_connection(("127.0.0.1", relay.port), timeout=10)
            s.sendall(request)
            assert s.recv(65536).startswith(b"HTTP/1.1 200")
            held.append(s)
        for _ in range(5):
            with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as extra:
                reply = extra.recv(65536)
            assert reply.startswith(b"HTTP/1.1 503"), reply
            assert b"more than 10 connections" in reply
        for s in held:
            s.close()
        held.clear()
        time.sleep(0.2)
        # Still alive, and serving again once connections ended.
        with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as again:
            again.sendall(request)
            assert again.recv(65536).startswith(b"HTTP/1.1 200")
    finally:
        for s in held:
            s.close()
        relay.proc.kill()
        relay.proc.wait()
