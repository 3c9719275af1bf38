"""The guarded client against real loopback servers: redirects, caps, TLS, secrets."""

from __future__ import annotations

import base64
import json
import time
from urllib.parse import quote

import pytest

from agentvisor.actions import Decision
from agentvisor.errors import NetworkBlocked, PolicyDenied
from agentvisor.net.access import NetworkAccess
from agentvisor.net.client import Fetcher, FetchFailed
from agentvisor.net.guard import Guard
from agentvisor.net.secrets import Secret, SecretStore

from .helpers import LoopbackOnlyDialer, RulesPolicy, Server, TableResolver, make_access

TOKEN = "ghp_TestSecretValue_0123456789abcdef"


def fetcher_for(*servers: Server, secrets: SecretStore | None = None, **kw) -> Fetcher:
    allow = {f"127.0.0.1:{s.port}" for s in servers}
    return Fetcher(make_access(allow), secrets=secrets, **kw)


def test_allowed_loopback_server_is_reached(server: Server) -> None:
    result = fetcher_for(server).request("GET", server.url("/"))
    assert result.status == 200 and b"hello" in result.content
    assert result.url == server.url("/")


def test_control_the_same_server_without_a_rule_is_refused(server: Server) -> None:
    with pytest.raises(NetworkBlocked, match="internal destination"):
        Fetcher(make_access()).request("GET", server.url("/"), tool="web_extract")
    assert server.connections == 0


def test_redirect_within_the_allowed_server_is_followed(server: Server) -> None:
    result = fetcher_for(server).request("GET", server.url("/redirect?to=/json"))
    assert result.status == 200 and result.content == b'{"ok": true}'
    assert result.url == server.url("/json")
    assert result.redirects == (server.url("/redirect?to=/json"),)


def test_redirect_to_a_port_without_a_rule_is_refused(server: Server) -> None:
    other = Server()
    try:
        target = quote(other.url("/"), safe="")
        with pytest.raises(NetworkBlocked, match=f"127.0.0.1:{other.port}"):
            fetcher_for(server).request("GET", server.url(f"/redirect?to={target}"))
        assert other.connections == 0
        # Control: with a rule for the second port too, the same redirect works.
        result = fetcher_for(server, other).request("GET", server.url(f"/redirect?to={target}"))
        assert result.status == 200 and other.connections == 1
    finally:
        other.close()


@pytest.mark.parametrize(
    "location",
    [
        "http://10.0.0.1/",
        "http://169.254.169.254/latest/",
        "http://[::1]:1/",
        "http://0x7f000001:1/",
        "file:///etc/passwd",
        "http://localhost:1/",
    ],
)
def test_redirect_to_a_private_address_is_refused(server: Server, location: str) -> None:
    dialer = LoopbackOnlyDialer()
    fetcher = Fetcher(make_access({f"127.0.0.1:{server.port}"}, dialer=dialer))
    with pytest.raises(NetworkBlocked):
        fetcher.request("GET", server.url(f"/redirect?to={quote(location, safe='')}"))
    assert dialer.dialed == [("127.0.0.1", server.port)]


def test_at_most_max_redirects_are_followed(server: Server) -> None:
    with pytest.raises(NetworkBlocked, match="more than 5 redirects"):
        fetcher_for(server).request("GET", server.url("/loop?stop=6"))
    assert len(server.requests) == 6
    result = fetcher_for(server).request("GET", server.url("/loop?stop=5"))
    assert result.content == b"after 5 redirects" and len(result.redirects) == 5


def test_303_turns_post_into_get_and_drops_the_body(server: Server) -> None:
    result = fetcher_for(server).request(
        "POST", server.url("/redirect?status=303&to=/echo"), body="payload"
    )
    echoed = json.loads(result.content)
    assert echoed["method"] == "GET" and echoed["body"] == ""


def test_response_size_is_capped(server: Server) -> None:
    result = fetcher_for(server, max_bytes=1000).request("GET", server.url("/big?n=5000"))
    assert result.truncated and len(result.content) == 1000
    control = fetcher_for(server, max_bytes=10000).request("GET", server.url("/big?n=5000"))
    assert not control.truncated and len(control.content) == 5000


def test_total_time_is_capped_even_for_a_trickling_server(server: Server) -> None:
    start = time.monotonic()
    with pytest.raises(FetchFailed, match="timed out"):
        fetcher_for(server, timeout=1.0).request("GET", server.url("/slow"))
    assert time.monotonic() - start < 2.5


def test_the_host_header_cannot_be_chosen(server: Server) -> None:
    result = fetcher_for(server).request(
        "GET", server.url("/echo"), headers={"Host": "api.github.com"}
    )
    assert json.loads(result.content)["headers"]["Host"] == f"127.0.0.1:{server.port}"


def test_https_verifies_the_certificate_of_the_original_name(
    tls_server: Server, client_ssl
) -> None:
    resolver = TableResolver({"secure.test": ["127.0.0.1"]})
    access = make_access({f"secure.test:{tls_server.port}"}, resolver=resolver)
    fetcher = Fetcher(access, verify=client_ssl)
    result = fetcher.request("GET", tls_server.url("/", host="secure.test"))
    assert result.status == 200 and b"hello" in result.content
    # Control: without the test CA the certificate is rejected.
    with pytest.raises(FetchFailed, match="CERTIFICATE_VERIFY_FAILED"):
        Fetcher(access).request("GET", tls_server.url("/", host="secure.test"))


def test_https_name_mismatch_is_rejected(tls_server: Server, client_ssl) -> None:
    resolver = TableResolver({"other.test": ["127.0.0.1"]})
    access = make_access({f"other.test:{tls_server.port}"}, resolver=resolver)
    with pytest.raises(FetchFailed, match=r"(?i)hostname|match"):
        Fetcher(access, verify=client_ssl).request("GET", tls_server.url("/", host="other.test"))


# --- secrets -----------------------------------------------------------------------------


@pytest.fixture
def token_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_API_TOKEN", TOKEN)


def store_for(hosts: list[str], header: str | None = None) -> SecretStore:
    return SecretStore([Secret("API_TOKEN", tuple(hosts), env="TEST_API_TOKEN", header=header)])


def test_secret_reaches_the_allowed_host_and_is_redacted_in_the_echo(
    server: Server, token_env: None
) -> None:
    fetcher = fetcher_for(server, secrets=store_for([f"127.0.0.1:{server.port}"]))
    result = fetcher.request(
        "POST",
        server.url("/echo?key={{secret:API_TOKEN}}"),
        headers={"Authorization": "Bearer {{secret:API_TOKEN}}"},
        body='{"token": "{{secret:API_TOKEN}}"}',
        tool="http_request",
    )
    sent = server.requests[-1]
    assert sent["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert sent["body"] == f'{{"token": "{TOKEN}"}}'.encode()
    assert TOKEN in sent["path"]
    assert TOKEN.encode() not in result.content
    echoed = json.loads(result.content)
    assert echoed["headers"]["Authorization"] == "Bearer {{secret:API_TOKEN}}"
    assert "{{secret:API_TOKEN}}" in echoed["path"]


def test_secret_toward_another_host_is_refused_and_never_sent(
    server: Server, token_env: None
) -> None:
    other = Server()
    try:
        fetcher = fetcher_for(server, other, secrets=store_for([f"127.0.0.1:{server.port}"]))
        with pytest.raises(NetworkBlocked, match=r"may only be sent to") as info:
            fetcher.request(
                "GET",
                other.url("/echo"),
                tool="http_request",
                headers={"Authorization": "Bearer {{secret:API_TOKEN}}"},
            )
        assert TOKEN not in str(info.value)
        assert other.connections == 0 and other.requests == []
        # Control: the same request without the placeholder goes through.
        assert fetcher.request("GET", other.url("/echo"), tool="http_request").status == 200
    finally:
        other.close()


def test_a_redirect_cannot_carry_a_secret_to_another_host(server: Server, token_env: None) -> None:
    other = Server()
    try:
        fetcher = fetcher_for(server, other, secrets=store_for([f"127.0.0.1:{server.port}"]))
        target = quote(other.url("/echo"), safe="")
        result = fetcher.request(
            "GET",
            server.url(f"/redirect?to={target}"),
            headers={
                "Authorization": "Bearer {{secret:API_TOKEN}}",
                "X-Key": "{{secret:API_TOKEN}}",
            },
            tool="http_request",
        )
        received = other.requests[-1]["headers"]
        assert "Authorization" not in received and "X-Key" not in received
        assert TOKEN.encode() not in result.content
        # A redirect whose Location carries a placeholder toward another host is refused.
        leak = quote(other.url("/echo?k={{secret:API_TOKEN}}"), safe="")
        with pytest.raises(NetworkBlocked, match="never in a server's Location"):
            fetcher.request("GET", server.url(f"/redirect?to={leak}"), tool="http_request")
        assert len(other.requests) == 1
    finally:
        other.close()


def test_echoed_encoded_forms_are_redacted(server: Server, token_env: None) -> None:
    fetcher = fetcher_for(server, secrets=store_for([f"127.0.0.1:{server.port}"]))
    result = fetcher.request(
        "GET",
        server.url("/echo_encoded"),
        tool="http_request",
        headers={"Authorization": "Bearer {{secret:API_TOKEN}}"},
    )
    text = result.content.decode()
    assert TOKEN not in text
    assert base64.b64encode(TOKEN.encode()).decode() not in text
    assert text.count("{{secret:API_TOKEN}}") == 3
    assert result.headers["x-echo"] == "{{secret:API_TOKEN}}"


def test_header_template_is_injected_only_toward_the_secret_hosts(
    server: Server, token_env: None
) -> None:
    other = Server()
    try:
        store = store_for([f"127.0.0.1:{server.port}"], header="Authorization: Bearer {value}")
        fetcher = fetcher_for(server, other, secrets=store)
        fetcher.request("GET", server.url("/echo"), tool="http_request", inject_headers=True)
        assert server.requests[-1]["headers"]["Authorization"] == f"Bearer {TOKEN}"
        fetcher.request("GET", other.url("/echo"), tool="http_request", inject_headers=True)
        assert "Authorization" not in other.requests[-1]["headers"]
    finally:
        other.close()


def test_secret_use_denied_by_policy_sends_nothing(server: Server, token_env: None) -> None:
    access = make_access({f"127.0.0.1:{server.port}"}, secrets=False)
    fetcher = Fetcher(access, secrets=store_for([f"127.0.0.1:{server.port}"]))
    with pytest.raises(PolicyDenied, match="nothing was sent"):
        fetcher.request(
            "GET",
            server.url("/echo"),
            tool="http_request",
            headers={"X-Key": "{{secret:API_TOKEN}}"},
        )
    assert server.requests == []


def test_unknown_secret_is_refused(server: Server) -> None:
    with pytest.raises(NetworkBlocked, match="unknown secret"):
        fetcher_for(server).request("GET", server.url("/?k={{secret:NOPE}}"))
    assert server.requests == []


def test_log_records_are_redacted(
    server: Server, token_env: None, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    fetcher = fetcher_for(server, secrets=store_for([f"127.0.0.1:{server.port}"]))
    with caplog.at_level(logging.INFO, logger="agentvisor.net"):
        logging.getLogger("agentvisor.net").info("debugging %s", TOKEN)
    assert TOKEN not in caplog.text and "{{secret:API_TOKEN}}" in caplog.text
    fetcher.close()


# --- redirects are the server's data: no confused deputy -----------------------------------


def test_a_placeholder_in_location_is_never_expanded(server: Server, token_env: None) -> None:
    """The Location points at the secret's own host with a placeholder: nothing the agent
    wrote references the secret, so it must not be used."""
    fetcher = fetcher_for(server, secrets=store_for([f"127.0.0.1:{server.port}"]))
    location = quote("/echo?stolen={{secret:API_TOKEN}}", safe="")
    with pytest.raises(NetworkBlocked, match="never in a server's Location") as info:
        fetcher.request("GET", server.url(f"/redirect?to={location}"), tool="http_request")
    assert info.value.rule == "guard:redirect-secret"
    assert [r["path"] for r in server.requests] == [f"/redirect?to={location}"]
    assert all(TOKEN not in r["path"] for r in server.requests)
    # Control: the agent's own placeholder, toward the same host, is expanded.
    fetcher.request("GET", server.url("/echo?k={{secret:API_TOKEN}}"), tool="http_request")
    assert TOKEN in server.requests[-1]["path"]


def _redirect_307(untrusted: Server, trusted: Server) -> str:
    return untrusted.url(f"/redirect?status=307&to={quote(trusted.url('/echo'), safe='')}")


def test_a_307_to_another_origin_drops_the_injected_credential(
    server: Server, token_env: None
) -> None:
    """An untrusted host answers 307 toward the secret's host: the body follows (a rule
    allows POST there) but the credential injected for that host does not."""
    untrusted = Server()
    try:
        store = store_for([f"127.0.0.1:{server.port}"], header="Authorization: Bearer {value}")
        fetcher = fetcher_for(server, untrusted, secrets=store)
        fetcher.request(
            "POST",
            _redirect_307(untrusted, server),
            body="agent data",
            tool="http_request",
            inject_headers=True,
        )
        received = server.requests[-1]
        assert received["method"] == "POST" and received["body"] == b"agent data"
        assert "Authorization" not in received["headers"]
        # Control: a request the agent sends to that host itself gets the header.
        fetcher.request("POST", server.url("/echo"), tool="http_request", inject_headers=True)
        assert server.requests[-1]["headers"]["Authorization"] == f"Bearer {TOKEN}"
    finally:
        untrusted.close()


class DefaultAllowsPolicy(RulesPolicy):
    """Every destination allowed by a default, none by a rule (as web_extract's GETs)."""

    def decide(self, action, context):
        return Decision("allow", "a default allows it", rule="default:fetch")

    def allows_exact_host(self, host, port, context):
        return Decision("allow", "a default allows it", rule="default:fetch")


def test_a_307_body_to_another_origin_needs_a_rule(server: Server) -> None:
    untrusted = Server()
    try:
        guard = Guard(resolver=TableResolver(), dialer=LoopbackOnlyDialer())
        fetcher = Fetcher(NetworkAccess(DefaultAllowsPolicy(), guard))
        with pytest.raises(NetworkBlocked, match="re-send the POST body") as info:
            fetcher.request(
                "POST", _redirect_307(untrusted, server), body="agent data", tool="http_request"
            )
        assert info.value.rule == "guard:redirect-body"
        assert server.requests == []
        # Control: a rule for the second host lets the same body follow.
        fetcher_for(server, untrusted).request(
            "POST", _redirect_307(untrusted, server), body="agent data", tool="http_request"
        )
        assert server.requests[-1]["body"] == b"agent data"
    finally:
        untrusted.close()


def test_a_307_never_carries_a_body_placeholder_to_another_origin(
    server: Server, token_env: None
) -> None:
    untrusted = Server()
    try:
        store = store_for([f"127.0.0.1:{server.port}", f"127.0.0.1:{untrusted.port}"])
        fetcher = fetcher_for(server, untrusted, secrets=store)
        with pytest.raises(NetworkBlocked, match="holds a secret placeholder"):
            fetcher.request(
                "POST",
                _redirect_307(untrusted, server),
                body="key={{secret:API_TOKEN}}",
                tool="http_request",
            )
        assert server.requests == []
    finally:
        untrusted.close()
