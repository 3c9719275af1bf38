"""Redaction of every common encoding of a secret, in one place (`redact_text`)."""

from __future__ import annotations

import socket

import pytest

from agentvisor.net.client import Fetcher, FetchFailed
from agentvisor.net.guard import Guard
from agentvisor.net.secrets import Secret, SecretStore, redact_text

from .helpers import RulesPolicy, Server, TableResolver

# Characters that each encoding writes differently: space, &, <, >, ", ', /, +, non-ASCII.
VALUE = "Tok en&<x>\"q'/+é_0123456789abcdef"
PLACEHOLDER = "{{secret:KEY}}"


@pytest.fixture
def fetcher(server: Server, monkeypatch: pytest.MonkeyPatch) -> Fetcher:
    from agentvisor.net.access import NetworkAccess

    monkeypatch.setenv("TEST_KEY", VALUE)
    store = SecretStore([Secret("KEY", (f"127.0.0.1:{server.port}",), env="TEST_KEY")])
    access = NetworkAccess(RulesPolicy({f"127.0.0.1:{server.port}"}), Guard(TableResolver()))
    return Fetcher(access, secrets=store)


@pytest.mark.parametrize(
    "form",
    [
        "pct-lower",
        "pct-mixed",
        "plus",
        "json-u",
        "json-u-all",
        "html-named",
        "html-decimal",
        "html-hex",
    ],
)
def test_every_encoding_the_server_echoes_is_redacted(
    fetcher: Fetcher, server: Server, form: str
) -> None:
    result = fetcher.request(
        "POST", server.url(f"/echo_forms?form={form}"), body=PLACEHOLDER, tool="http_request"
    )
    assert server.requests[-1]["body"] == VALUE.encode()  # control: the value went out
    assert result.content == f"<p>{PLACEHOLDER}</p>".encode(), result.content


def test_fragments_of_a_secret_in_an_error_are_redacted(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentvisor.net.access import NetworkAccess

    def failing_dialer(address: str, port: int, timeout: float) -> socket.socket:
        raise ConnectionRefusedError(111, f"upstream said: bad key {VALUE[:9]}..{VALUE[-7:]}")

    monkeypatch.setenv("TEST_KEY", VALUE)
    store = SecretStore([Secret("KEY", (f"127.0.0.1:{server.port}",), env="TEST_KEY")])
    access = NetworkAccess(
        RulesPolicy({f"127.0.0.1:{server.port}"}), Guard(TableResolver(), dialer=failing_dialer)
    )
    with pytest.raises(FetchFailed) as info:
        Fetcher(access, secrets=store).request("GET", server.url("/"), tool="http_request")
    message = str(info.value)
    assert VALUE[:9] not in message and VALUE[-7:] not in message
    assert message.count(PLACEHOLDER) == 2 and "upstream said: bad key" in message


def test_redact_text_is_the_one_function_for_stored_texts() -> None:
    values = {"KEY": VALUE}
    lower = "".join(f"%{b:02x}" for b in VALUE.encode())
    stored = f"approved: curl -H 'X: {lower}' && echo :{VALUE[4:14]}"
    redacted = redact_text(stored, values)
    assert redacted == f"approved: curl -H 'X: {PLACEHOLDER}' && echo :{PLACEHOLDER}"
    # Control: ordinary text, and runs too short to be a fragment, stay as they are.
    assert redact_text("Token 0123 abc", values) == "Token 0123 abc"
    assert redact_text("nothing secret here", {}) == "nothing secret here"
    # A word a value happens to contain is not a fragment; a run mixing kinds of
    # character is.
    word_value = {"K": "granted-value-123456"}
    assert redact_text("was not granted (granted: K)", word_value) == (
        "was not granted (granted: K)"
    )
    assert redact_text("key value-12345...", word_value) == "key {{secret:K}}..."


def test_a_non_ascii_header_is_a_clear_error_not_a_crash(fetcher: Fetcher, server: Server) -> None:
    with pytest.raises(FetchFailed, match="'X-Name': header names and values must be ASCII"):
        fetcher.request("GET", server.url("/"), headers={"X-Name": "é"}, tool="http_request")
    assert server.requests == []
