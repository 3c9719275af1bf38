"""The egress proxy terminating TLS toward a secret's hosts (issue 18), on loopback."""

from __future__ import annotations

import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentvisor.net.proxy import EgressProxy
from agentvisor.net.secrets import Secret, SecretStore

from .helpers import LoopbackOnlyDialer, Server, TableResolver, make_access
from .test_proxy import Relayed

TOKEN = "sk-run-0123456789abcdefghijklmnop"
PLACEHOLDER = "{{secret:API_KEY}}"


@pytest.fixture
def other_tls(ca: Any) -> Iterator[Server]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("other.test").configure_cert(context)
    s = Server(tls=context)
    yield s
    s.close()


def intercepting(
    tls_server: Server,
    other: Server,
    ca_file: str | None,
    proxy_body: bool = False,
    **policy: Any,
) -> EgressProxy:
    resolver = TableResolver({"api.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    access = make_access(
        {f"api.test:{tls_server.port}", f"other.test:{other.port}"},
        resolver=resolver,
        dialer=LoopbackOnlyDialer(),
        **policy,
    )
    hosts = (f"api.test:{tls_server.port}",)
    store = SecretStore([Secret("API_KEY", hosts, env="RUN_KEY", proxy_body=proxy_body)])
    return EgressProxy(access, timeout=10, secrets=store, ca_file=ca_file)


@pytest.fixture
def ca_file(ca: Any, tmp_path: Path) -> str:
    path = tmp_path / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def tls_server(ca: Any) -> Iterator[Server]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("api.test").configure_cert(context)
    s = Server(tls=context)
    yield s
    s.close()


def run_ca_client(proxy: EgressProxy, relay: Relayed, tmp_path: Path):
    import httpx

    trust = tmp_path / "run-ca.pem"
    trust.write_bytes(proxy.attachment().ro_data["/run/agentvisor/run-ca.pem"])
    context = ssl.create_default_context(cafile=str(trust))
    return httpx.Client(proxy=relay.url, verify=context, trust_env=False, timeout=10)


def received(server: Server) -> dict[str, str]:
    return {k.lower(): v for k, v in server.requests[0]["headers"].items()}


@pytest.fixture
def run_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUN_KEY", TOKEN)


def test_the_value_reaches_the_secret_host_and_comes_back_redacted(
    tls_server: Server, other_tls: Server, ca_file: str, tmp_path: Path, run_key: None
) -> None:
    with intercepting(tls_server, other_tls, ca_file) as proxy:
        relay = Relayed(proxy, ["sleep", "60"])
        try:
            with run_ca_client(proxy, relay, tmp_path) as c:
                response = c.get(
                    f"https://api.test:{tls_server.port}/echo_encoded",
                    headers={"Authorization": f"Bearer {PLACEHOLDER}"},
                )
                again = c.get(f"https://api.test:{tls_server.port}/")  # keep-alive, admitted
        finally:
            relay.proc.kill()
            relay.proc.wait()
    assert received(tls_server)["authorization"] == f"Bearer {TOKEN}"
    assert response.status_code == 200 and TOKEN not in response.text
    assert response.text.count(PLACEHOLDER) == 3  # raw, base64, URL-encoded echoes
    assert response.headers["x-echo"] == PLACEHOLDER
    assert again.status_code == 200 and len(tls_server.requests) == 2


def test_other_hosts_are_tunnelled_untouched(
    tls_server: Server, other_tls: Server, ca_file: str, ca: Any, run_key: None
) -> None:
    """TLS to a host no secret may reach is not terminated: the client sees the server's
    own certificate, and a placeholder is sent as the text it is."""
    import httpx

    with intercepting(tls_server, other_tls, ca_file) as proxy:
        relay = Relayed(proxy, ["sleep", "60"])
        try:
            context = ssl.create_default_context()
            ca.configure_trust(context)  # the real server's CA, not the run CA
            with httpx.Client(proxy=relay.url, verify=context, trust_env=False) as c:
                response = c.get(
                    f"https://other.test:{other_tls.port}/echo",
                    headers={"Authorization": f"Bearer {PLACEHOLDER}"},
                )
        finally:
            relay.proc.kill()
            relay.proc.wait()
    assert response.status_code == 200
    assert received(other_tls)["authorization"] == f"Bearer {PLACEHOLDER}"


def test_the_upstream_certificate_is_verified(
    tls_server: Server, other_tls: Server, tmp_path: Path, run_key: None
) -> None:
    """Without network.ca_file trusting the test CA, the upstream is refused (502) and
    nothing reaches it; the control above shows the same request succeeding with it."""
    with intercepting(tls_server, other_tls, None) as proxy:
        relay = Relayed(proxy, ["sleep", "60"])
        try:
            with run_ca_client(proxy, relay, tmp_path) as c:
                response = c.get(
                    f"https://api.test:{tls_server.port}/echo",
                    headers={"Authorization": f"Bearer {PLACEHOLDER}"},
                )
        finally:
            relay.proc.kill()
            relay.proc.wait()
    assert response.status_code == 502
    assert "CERTIFICATE_VERIFY_FAILED" in response.headers["x-agentvisor-reason"]
    assert tls_server.requests == []


def test_secret_use_refused_by_policy_sends_nothing(
    tls_server: Server, other_tls: Server, ca_file: str, tmp_path: Path, run_key: None
) -> None:
    with intercepting(tls_server, other_tls, ca_file, secrets=False) as proxy:
        relay = Relayed(proxy, ["sleep", "60"])
        try:
            with run_ca_client(proxy, relay, tmp_path) as c:
                response = c.get(
                    f"https://api.test:{tls_server.port}/echo",
                    headers={"Authorization": f"Bearer {PLACEHOLDER}"},
                )
        finally:
            relay.proc.kill()
            relay.proc.wait()
    assert response.status_code == 403 and "nothing was sent" in response.text
    assert tls_server.requests == []


def test_bytes_sent_before_an_intercepted_tunnel_opens_are_refused(
    tls_server: Server, other_tls: Server, ca_file: str, run_key: None
) -> None:
    import socket

    with intercepting(tls_server, other_tls, ca_file) as proxy:
        relay = Relayed(proxy, ["sleep", "60"])
        try:
            head = f"CONNECT api.test:{tls_server.port} HTTP/1.1\r\nHost: a\r\n\r\n".encode()
            with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as s:
                s.sendall(head + b"\x16\x03\x01early")
                reply = s.recv(4096)
            assert reply.startswith(b"HTTP/1.1 400") and b"before the tunnel" in reply
            # Control: the same CONNECT alone opens the tunnel.
            with socket.create_connection(("127.0.0.1", relay.port), timeout=10) as s:
                s.sendall(head)
                assert s.recv(4096).startswith(b"HTTP/1.1 200")
        finally:
            relay.proc.kill()
            relay.proc.wait()
    assert tls_server.requests == []


def test_a_secret_whose_value_cannot_be_read_is_a_clear_error(
    tls_server: Server, other_tls: Server, ca_file: str, tmp_path: Path
) -> None:
    """RUN_KEY is not set on the host: the harness gets a 502 naming the variable."""
    with intercepting(tls_server, other_tls, ca_file) as proxy:
        relay = Relayed(proxy, ["sleep", "60"])
        try:
            with run_ca_client(proxy, relay, tmp_path) as c:
                response = c.get(
                    f"https://api.test:{tls_server.port}/echo",
                    headers={"Authorization": f"Bearer {PLACEHOLDER}"},
                )
        finally:
            relay.proc.kill()
            relay.proc.wait()
    assert response.status_code == 502 and "RUN_KEY is not set" in response.text
    assert tls_server.requests == []


@pytest.mark.parametrize("proxy_body", [True, False])
def test_body_placeholders_are_filled_only_when_the_secret_says_so(
    tls_server: Server,
    other_tls: Server,
    ca_file: str,
    tmp_path: Path,
    run_key: None,
    proxy_body: bool,
) -> None:
    body = f'{{"api_key": "{PLACEHOLDER}", "text": "hello"}}'
    with intercepting(tls_server, other_tls, ca_file, proxy_body=proxy_body) as proxy:
        relay = Relayed(proxy, ["sleep", "60"])
        try:
            with run_ca_client(proxy, relay, tmp_path) as c:
                response = c.post(f"https://api.test:{tls_server.port}/echo", content=body)
        finally:
            relay.proc.kill()
            relay.proc.wait()
    sent = tls_server.requests[0]["body"].decode()
    if proxy_body:
        assert sent == body.replace(PLACEHOLDER, TOKEN)  # and its Content-Length fits
    else:  # control: headers only, the body's placeholder is sent as the text it is
        assert sent == body
    assert response.status_code == 200 and TOKEN not in response.text


def test_a_body_too_large_to_fill_is_refused(
    tls_server: Server,
    other_tls: Server,
    ca_file: str,
    tmp_path: Path,
    run_key: None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentvisor.net import intercept

    monkeypatch.setattr(intercept, "MAX_FILLED_BODY", 1000)
    with intercepting(tls_server, other_tls, ca_file, proxy_body=True) as proxy:
        relay = Relayed(proxy, ["sleep", "60"])
        try:
            with run_ca_client(proxy, relay, tmp_path) as c:
                response = c.post(f"https://api.test:{tls_server.port}/echo", content=b"x" * 2000)
        finally:
            relay.proc.kill()
            relay.proc.wait()
    assert response.status_code == 413 and tls_server.requests == []


def test_the_harness_keeps_its_connection_when_the_server_closes_each(
    other_tls: Server, ca: Any, ca_file: str, tmp_path: Path, run_key: None
) -> None:
    """An upstream that closes after every response (SSE endpoints do): the proxy dials
    it again for the next request on the harness's same connection."""
    import http.client

    class Closing(Server):
        def route_closing(self, h: Any, q: dict[str, str], body: bytes) -> None:
            h._send(200, b"one response", "text/plain", {"Connection": "close"})
            h.close_connection = True

    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("api.test").configure_cert(context)
    closing = Closing(tls=context)
    try:
        with intercepting(closing, other_tls, ca_file) as proxy:
            relay = Relayed(proxy, ["sleep", "60"])
            try:
                trust = tmp_path / "run-ca.pem"
                trust.write_bytes(proxy.attachment().ro_data["/run/agentvisor/run-ca.pem"])
                client_ctx = ssl.create_default_context(cafile=str(trust))
                conn = http.client.HTTPSConnection("127.0.0.1", relay.port, context=client_ctx)
                conn.set_tunnel("api.test", closing.port)
                replies = []
                for _ in range(2):
                    conn.request("GET", "/closing")
                    replies.append(conn.getresponse().read())
                conn.close()
            finally:
                relay.proc.kill()
                relay.proc.wait()
        assert replies == [b"one response", b"one response"]
        assert closing.connections == 2  # one upstream connection per response
    finally:
        closing.close()
