"""The network layer with the real policy engine and approval broker, from a YAML config."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from urllib.parse import quote

import pytest

from agentvisor.config import load_config
from agentvisor.errors import NetworkBlocked, PolicyDenied
from agentvisor.net.access import NetworkAccess
from agentvisor.net.client import Fetcher
from agentvisor.net.guard import Guard
from agentvisor.net.proxy import EgressProxy
from agentvisor.net.tools import WebTools

from .helpers import SHARED, LoopbackOnlyDialer, Server, TableResolver
from .test_guard import _corpus_rows

TOKEN = "sk-test-0123456789abcdefghij"


def write_config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "agentvisor.yaml"
    path.write_text(text)
    return path


def config_text(token_port: int, *fetch_ports: int) -> str:
    rules = "".join(
        f'  - {{decision: allow, kind: fetch, pattern: "127.0.0.1:{port}"}}\n'
        for port in (token_port, *fetch_ports)
    )
    return f"""
rules:
{rules}  - {{decision: allow, kind: secret, pattern: "API_TOKEN@127.0.0.1"}}
secrets:
  - name: API_TOKEN
    env: TEST_API_TOKEN
    hosts: ["127.0.0.1:{token_port}"]
network:
  max_redirects: 2
"""


@pytest.fixture
def config_file(
    tmp_path: Path, server: Server, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    monkeypatch.setenv("TEST_API_TOKEN", TOKEN)
    return write_config(tmp_path, config_text(server.port))


def access_for(config, resolver=None) -> NetworkAccess:
    guard = Guard(
        resolver=resolver or TableResolver({"localhost": ["127.0.0.1", "::1"]}),
        dialer=LoopbackOnlyDialer(),
    )
    return NetworkAccess.from_config(config, guard=guard)


def test_exact_rule_opens_the_loopback_server(config_file: Path, server: Server) -> None:
    config = load_config(config_file)
    with WebTools.from_config(
        config, fetcher=Fetcher.from_config(config, access_for(config))
    ) as tools:
        assert tools.web_extract(server.url("/"))["text"].startswith("hello")
        result = tools.http_request(
            "POST",
            server.url("/echo"),
            body="{{secret:API_TOKEN}}",
            headers={"X-Key": "{{secret:API_TOKEN}}"},
        )
    assert server.requests[-1]["body"] == TOKEN.encode()
    assert TOKEN not in json.dumps(result) and "{{secret:API_TOKEN}}" in result["body"]


def test_redirects_to_other_ports_and_private_hosts_are_refused(
    config_file: Path, server: Server
) -> None:
    config = load_config(config_file)
    other = Server()
    try:
        fetcher = Fetcher.from_config(config, access_for(config))
        for location in (other.url("/"), "http://10.0.0.1/", "http://[::1]/"):
            with pytest.raises((NetworkBlocked, PolicyDenied)):
                fetcher.request(
                    "GET",
                    server.url(f"/redirect?to={quote(location, safe='')}"),
                    tool="web_extract",
                )
        assert other.connections == 0
        with pytest.raises(NetworkBlocked, match="more than 2 redirects"):
            fetcher.request("GET", server.url("/loop?stop=3"), tool="web_extract")
    finally:
        other.close()


def test_secret_toward_another_host_is_refused(config_file: Path, server: Server) -> None:
    other = Server()
    try:
        config = load_config(write_config(config_file.parent, config_text(server.port, other.port)))
        fetcher = Fetcher.from_config(config, access_for(config))
        with pytest.raises(NetworkBlocked, match="may only be sent"):
            fetcher.request("GET", other.url("/echo?k={{secret:API_TOKEN}}"), tool="http_request")
        assert other.requests == []
    finally:
        other.close()


def test_unattended_ask_is_denied(config_file: Path) -> None:
    config = load_config(config_file)
    resolver = TableResolver()
    with pytest.raises(PolicyDenied, match="no person can be reached"):
        Fetcher.from_config(config, access_for(config, resolver)).request(
            "POST", "https://api.example.com/", tool="http_request"
        )
    assert resolver.calls == []  # refused before any lookup


@pytest.mark.parametrize(
    "row",
    _corpus_rows()
    or [
        pytest.param(
            None, marks=pytest.mark.skip(reason=f"{SHARED}/corpus is not beside this checkout")
        )
    ],
)
def test_corpus_is_denied_by_the_real_default_policy(row, isolated_home: Path) -> None:
    config = load_config(write_config(isolated_home, "{}\n"))
    dialer = LoopbackOnlyDialer()
    guard = Guard(resolver=TableResolver({"localhost": ["127.0.0.1", "::1"]}), dialer=dialer)
    access = NetworkAccess.from_config(config, guard=guard)
    for tool in ("web_extract", "fetch", "proxy"):
        with pytest.raises((NetworkBlocked, PolicyDenied)):
            Fetcher(access).request("GET", row[2], tool=tool)
        assert access.preview(row[2], tool=tool).verdict == "deny"
    assert dialer.dialed == []


def test_proxy_defaults_to_deny_and_follows_rules(config_file: Path, server: Server) -> None:
    config = load_config(config_file)
    proxy = EgressProxy.from_config(config, access=access_for(config))
    assert proxy.port == 3128
    access = proxy.access
    assert access.admit_url(server.url("/"), tool="proxy").decision.allowed
    resolver = TableResolver()
    with pytest.raises(PolicyDenied, match="only what a rule allows"):
        access_for(config, resolver).admit_url("https://example.com/", tool="proxy")
    assert resolver.calls == []


# --- the CLI ------------------------------------------------------------------------------


def cli(*args: str) -> tuple[int, str, str]:
    from agentvisor.frontends.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_cli_fetch_prints_the_body(
    config_file: Path, server: Server, capsysbinary: pytest.CaptureFixture
) -> None:
    from agentvisor.frontends.cli import main

    assert main(["fetch", "--config", str(config_file), server.url("/")]) == 0
    assert capsysbinary.readouterr().out == b"hello from the test server\n"
    code, out, _ = cli(
        "fetch", "--config", str(config_file), "--json", server.url("/echo?k={{secret:API_TOKEN}}")
    )
    assert code == 0 and TOKEN not in out and json.loads(out)["status"] == 200


def test_cli_fetch_refuses_with_the_reason(config_file: Path, server: Server) -> None:
    code, _, err = cli(
        "fetch",
        "--config",
        str(config_file),
        server.url("/").replace(str(server.port), str(server.port + 1)),
    )
    assert code == 125 and "internal destination" in err


@pytest.mark.parametrize("url", [r[2] for r in _corpus_rows()] + ["ALLOWED"])
def test_cli_fetch_agrees_with_check_fetch(url: str, config_file: Path, server: Server) -> None:
    if url == "ALLOWED":
        url = server.url("/")
    code, _, _ = cli("fetch", "--config", str(config_file), "--json", url)
    fetched = code != 125
    check_code, out, _ = cli("check", "--config", str(config_file), "--tool", "fetch", "fetch", url)
    allowed = check_code == 0 and json.loads(out)["decision"] == "allow"
    assert fetched == allowed, (url, out)


# --- one decision for `check fetch` and the real fetch -------------------------------------

# Internal forms `check fetch --tool web_extract` used to allow (the policy alone judged them).
EXTRA_INTERNAL = [
    "http://[::127.0.0.1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[2002:7f00:1::1]/",
    "http://[::ffff:0:a9fe:a9fe]/latest/meta-data/",
    "http://[64:ff9b::a9fe:a9fe]/",
]


def _check(config_file: Path, tool: str, url: str) -> dict:
    code, out, err = cli("check", "--config", str(config_file), "--tool", tool, "fetch", url)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("url", [r[2] for r in _corpus_rows()] + EXTRA_INTERNAL + ["ALLOWED"])
def test_check_fetch_and_the_real_fetch_give_the_same_decision_and_reason(
    url: str, config_file: Path, server: Server
) -> None:
    """The shared corpus through `agentvisor fetch` and `agentvisor check fetch`: refused by
    both with the same reason (hardline ones flagged), or allowed by both."""
    if url == "ALLOWED":
        url = server.url("/")
    code, _, err = cli("fetch", "--config", str(config_file), "--json", url)
    checked = _check(config_file, "fetch", url)
    if code == 125:
        assert checked["decision"] == "deny", (url, checked)
        assert checked["reason"] in err, (url, checked["reason"], err)
        metadata = "metadata" in checked["reason"]
        assert checked["hardline"] is metadata, checked
    else:
        assert checked["decision"] == "allow", (url, checked)
    # The same through the library for the other tools, including web_extract's defaults.
    config = load_config(config_file)
    for tool in ("web_extract", "http_request", "proxy"):
        access = access_for(config)
        previewed = access.preview(url, tool=tool)
        try:
            Fetcher(access).request("GET", url, tool=tool)
        except (NetworkBlocked, PolicyDenied) as exc:
            assert previewed.verdict == "deny", (tool, url, previewed)
            assert previewed.reason in str(exc), (tool, url)
        else:
            assert previewed.verdict == "allow", (tool, url, previewed)


@pytest.mark.parametrize("mode", ["--json", "--extract"])
def test_cli_fetch_with_an_unknown_charset_falls_back_and_says_so(
    config_file: Path, server: Server, mode: str
) -> None:
    code, out, err = cli(
        "fetch", "--config", str(config_file), mode, server.url("/unknown_charset")
    )
    assert code == 0, err
    assert "x-no-such-charset" in err and "Traceback" not in err
    if mode == "--json":
        assert "café ok" in json.loads(out)["body"]
