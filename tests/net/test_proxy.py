"""The egress proxy and its relay, on the host (the sandbox test is test_proxy_sandbox.py)."""

from __future__ import annotations

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

    def __init__(self, proxy: EgressProxy, command: list[str]) -> None:
        self.port = free_port()
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
            ]
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
