"""The destination guard: URL reading, address classification, DNS pinning, admission."""

from __future__ import annotations

import ipaddress

import pytest

from agentvisor.errors import NetworkBlocked, PolicyDenied
from agentvisor.net.guard import Guard, classify_ip, parse_hostport, parse_url

from .helpers import PUBLIC_IP, SHARED, LoopbackOnlyDialer, RulesPolicy, TableResolver, make_access


@pytest.mark.parametrize(
    "url, host, port",
    [
        ("http://127.1/", "127.0.0.1", 80),
        ("http://0/", "0.0.0.0", 80),
        ("http://2130706433/", "127.0.0.1", 80),
        ("http://0x7f000001/", "127.0.0.1", 80),
        ("http://0X7F.1/", "127.0.0.1", 80),
        ("http://017700000001/", "127.0.0.1", 80),
        ("http://0177.0.0.1/", "127.0.0.1", 80),
        ("http://127.000.000.001/", "127.0.0.1", 80),
        ("http://10.1/", "10.0.0.1", 80),
        ("http://192.168.257/", "192.168.1.1", 80),
        ("http://127.0.0.1./", "127.0.0.1", 80),
        ("http://%31%32%37.0.0.1/", "127.0.0.1", 80),
        ("http://１２７．０．０．１/", "127.0.0.1", 80),  # fullwidth digits and dots
        ("http://127。0。0。1/", "127.0.0.1", 80),  # ideographic full stops
        ("http://[::ffff:127.0.0.1]:8080/", "::ffff:7f00:1", 8080),
        ("http://[0:0:0:0:0:0:0:1]/", "::1", 80),
        ("HTTPS://Example.COM./a", "example.com", 443),
        ("http://ex%41mple.com/", "example.com", 80),
        ("http://ⓔⓧⓐⓜⓟⓛⓔ.com/", "example.com", 80),
        ("http://bücher.example/", "xn--bcher-kva.example", 80),
    ],
)
def test_hosts_are_normalised(url: str, host: str, port: int) -> None:
    target = parse_url(url)
    assert (target.host, target.port) == (host, port)


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "gopher://127.0.0.1:6379/_INFO",
        "ftp://10.0.0.1/",
        "dict://x/",
        "ldap://x/",
        "jar:http://x/!/",
        "data:text/plain,hi",
        "javascript:alert(1)",
        "//x/",
        "http:/x/",
        "http://example.com@127.0.0.1/",
        "http://user:pass@localhost:8080/",
        "http://a%40b@c/",
        "http://example.com\\@127.0.0.1/",
        "http://exa mple.com/",
        "http://example.com\t/",
        "http://exa\nmple.com/",
        "http://[::1%25eth0]/",
        "http://1.2.3.4.5/",
        "http://256.1/",
        "http://08.1/",
        "http://4294967296/",
        "http://example.com:0/",
        "http://example.com:99999/",
        "http://example.com:8a/",
        "http://%2f%2f/",
        "http://a..b/",
        "http:///path",
        "http://[::1/",
        "http://ex%00ample.com/",
        "http://a:1:2/",
        "http://%25%32%65/",
    ],
)
def test_ambiguous_or_foreign_urls_are_refused(url: str) -> None:
    with pytest.raises(NetworkBlocked):
        parse_url(url)


def test_fragment_is_dropped_and_query_kept() -> None:
    assert parse_url("http://example.com?x=1#frag").url == "http://example.com/?x=1"


@pytest.mark.parametrize(
    "address, reason",
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.20.0.1", "private"),
        ("192.168.0.1", "private"),
        ("100.64.0.1", "carrier-grade NAT"),
        ("169.254.1.1", "link-local"),
        ("198.18.0.1", "benchmarking"),
        ("198.19.255.1", "benchmarking"),
        ("224.0.0.1", "multicast"),
        ("239.255.255.250", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("255.255.255.255", "reserved"),
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fd00::1", "unique-local"),
        ("fe80::1", "link-local"),
        ("ff02::1", "multicast"),
        ("::ffff:10.0.0.1", "private"),
        ("::10.0.0.1", "private"),
        ("64:ff9b::7f00:1", "loopback"),
        ("2002:c0a8:101::1", "private"),
        ("::ffff:0:a00:1", "private"),
    ],
)
def test_blocked_ranges(address: str, reason: str) -> None:
    found = classify_ip(ipaddress.ip_address(address))
    assert found is not None and reason in found


@pytest.mark.parametrize(
    "address",
    ["93.184.215.14", "1.1.1.1", "2606:4700::1111", "64:ff9b::5db8:d70e", "::ffff:93.184.215.14"],
)
def test_public_addresses_pass(address: str) -> None:
    assert classify_ip(ipaddress.ip_address(address)) is None


def test_connect_target_is_read_like_a_url() -> None:
    assert parse_hostport("Example.COM:443").hostport == "example.com:443"
    assert parse_hostport("[::1]:8443").host == "::1"
    for bad in ("example.com", "a@b:443", "example.com:443/x", "example.com:0"):
        with pytest.raises(NetworkBlocked):
            parse_hostport(bad)


# --- admission: policy plus guard --------------------------------------------------------


def test_public_page_is_admitted_for_web_extract() -> None:
    access = make_access()
    admission = access.admit_url("https://example.com/", tool="web_extract")
    assert admission.resolved.addresses == (PUBLIC_IP,)


def test_internal_destinations_need_an_exact_rule() -> None:
    access = make_access(allow={"127.0.0.1:8080"})
    assert access.admit_url("http://127.0.0.1:8080/", tool="web_extract").decision.allowed
    with pytest.raises(NetworkBlocked, match="internal destination"):
        access.admit_url("http://127.0.0.1:8081/", tool="web_extract")


def test_a_name_resolving_to_a_private_address_is_internal() -> None:
    resolver = TableResolver({"intranet.example.com": ["10.0.0.7"]})
    access = make_access(resolver=resolver)
    with pytest.raises(NetworkBlocked, match=r"10\.0\.0\.7: private"):
        access.admit_url("https://intranet.example.com/", tool="web_extract")


def test_one_private_address_among_public_ones_blocks_the_name() -> None:
    resolver = TableResolver({"mixed.example.com": [PUBLIC_IP, "127.0.0.1"]})
    with pytest.raises(NetworkBlocked, match=r"127\.0\.0\.1: loopback"):
        make_access(resolver=resolver).admit_url("http://mixed.example.com/", tool="web_extract")


def test_a_denied_name_is_never_looked_up() -> None:
    resolver = TableResolver()
    access = make_access(resolver=resolver)
    with pytest.raises(PolicyDenied):
        access.admit_url("https://exfil-data.example.com/", method="POST", tool="http_request")
    assert resolver.calls == []


def test_metadata_is_refused_even_with_an_exact_rule() -> None:
    access = make_access(allow={"169.254.169.254:80", "metadata.google.internal:80"})
    for url in (
        "http://169.254.169.254/",
        "http://metadata.google.internal/",
        "http://[::ffff:169.254.169.254]/",
    ):
        with pytest.raises(NetworkBlocked, match="metadata"):
            access.admit_url(url, tool="web_extract")
    resolver = TableResolver({"sneaky.example.com": ["169.254.169.254"]})
    with pytest.raises(NetworkBlocked, match="metadata"):
        make_access(resolver=resolver).admit_url("http://sneaky.example.com/", tool="web_extract")


def test_rebinding_resolver_cannot_redirect_the_connection(server) -> None:
    """A resolver that answers public first and loopback next: only the checked answer is
    dialed, the name is looked up once, and the loopback server sees no connection."""
    answers = iter([[PUBLIC_IP], ["127.0.0.1"], ["127.0.0.1"]])
    resolver = TableResolver({"rebind.example.com": lambda: next(answers)})
    dialer = LoopbackOnlyDialer()
    access = make_access(resolver=resolver, dialer=dialer)
    from agentvisor.net.client import Fetcher, FetchFailed

    fetcher = Fetcher(access)
    with pytest.raises(FetchFailed, match="cannot connect"):
        fetcher.request("GET", f"http://rebind.example.com:{server.port}/", tool="web_extract")
    assert resolver.calls == ["rebind.example.com"]
    assert dialer.dialed == [(PUBLIC_IP, server.port)]
    assert server.connections == 0
    # Control: a resolver that answers loopback at once is caught by the check.
    with pytest.raises(NetworkBlocked, match="loopback"):
        fetcher.request("GET", f"http://rebind.example.com:{server.port}/", tool="web_extract")


def test_extra_blocked_ranges() -> None:
    guard = Guard(resolver=TableResolver(), extra_blocked=["93.184.0.0/16"])
    resolved = guard.resolve(parse_url("http://example.com/"))
    assert resolved.internal and "network.block" in resolved.internal[0]


# An address range the operator blocks, and (8.8.8.8) an address nobody blocks.
OPERATOR_BLOCK = "45.33.0.0/16"
BLOCKED_V4 = "45.33.32.156"
IPV6_FORMS = [
    "::ffff:{v4}",  # IPv4-mapped
    "::{v4}",  # IPv4-compatible
    "::ffff:0:{v4}",  # SIIT-translated
    "64:ff9b::{v4}",  # NAT64 well-known prefix
    "2002:{hex6to4}::1",  # 6to4
]


def _ipv6_forms(v4: str) -> list[str]:
    packed = ipaddress.IPv4Address(v4).packed.hex()
    hex6to4 = f"{packed[:4]}:{packed[4:]}"
    return [form.format(v4=v4, hex6to4=hex6to4) for form in IPV6_FORMS]


@pytest.mark.parametrize("form", range(len(IPV6_FORMS)))
def test_operator_ranges_catch_every_ipv6_form_of_an_address(form: int) -> None:
    """network.block is matched by the same function as the built-in ranges, against the
    IPv4 address an IPv6 literal (or a name's IPv6 answer) embeds."""
    guard = Guard(resolver=TableResolver(), extra_blocked=[OPERATOR_BLOCK])
    blocked_form = _ipv6_forms(BLOCKED_V4)[form]
    assert "network.block" in str(guard.reason(ipaddress.ip_address(blocked_form)))
    named = Guard(
        resolver=TableResolver({"sneaky.example.com": [blocked_form]}),
        extra_blocked=[OPERATOR_BLOCK],
    ).resolve(parse_url("https://sneaky.example.com/"))
    assert named.internal and "network.block" in named.internal[0]
    # Control: the same form of an address outside the operator's range passes.
    assert guard.reason(ipaddress.ip_address(_ipv6_forms("8.8.8.8")[form])) is None


def test_operator_ranges_are_refused_through_admission_in_every_form() -> None:
    access = make_access(
        resolver=TableResolver(), dialer=LoopbackOnlyDialer(), allow={"example.com:443"}
    )
    access.guard = Guard(resolver=TableResolver(), extra_blocked=[OPERATOR_BLOCK])
    for form in _ipv6_forms(BLOCKED_V4):
        with pytest.raises(NetworkBlocked, match=r"network\.block"):
            access.admit_url(f"http://[{form}]/", tool="web_extract")
    assert access.admit_url("http://[::ffff:8.8.8.8]/", tool="web_extract").decision.allowed


def test_teredo_addresses_are_judged_by_both_embedded_addresses() -> None:
    # Teredo server 65.54.227.120, client 127.0.0.1 (obfuscated as 0x80fffffe).
    teredo = ipaddress.ip_address("2001:0:4136:e378:8000:63bf:80ff:fffe")
    assert ipaddress.IPv6Address(teredo).teredo == (
        ipaddress.IPv4Address("65.54.227.120"),
        ipaddress.IPv4Address("127.0.0.1"),
    )
    assert "loopback" in str(classify_ip(teredo))
    guard = Guard(extra_blocked=["65.54.0.0/16"])
    assert "network.block" in str(guard.reason(teredo))


# --- the shared corpus -------------------------------------------------------------------


def _corpus_rows() -> list[tuple[str, str, str]]:
    path = SHARED / "corpus" / "urls-internal.tsv"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            expected, category, url = line.split("\t", 2)
            rows.append((expected, category, url))
    return rows


@pytest.mark.parametrize(
    "row",
    _corpus_rows()
    or [
        pytest.param(
            None,
            marks=pytest.mark.skip(
                reason=f"{SHARED}/corpus/urls-internal.tsv is not beside this checkout"
            ),
        )
    ],
)
@pytest.mark.parametrize("tool", ["web_extract", "fetch", "proxy"])
def test_internal_corpus_is_denied_by_default(row: tuple[str, str, str], tool: str) -> None:
    """Under the default policy (no rules) every row is refused before any connection.
    Names resolve as /etc/hosts would for localhost, and to a public address otherwise,
    so a refusal must come from reading the URL itself."""
    expected, _category, url = row
    assert expected == "deny"
    dialer = LoopbackOnlyDialer()
    access = make_access(resolver=TableResolver({"localhost": ["127.0.0.1", "::1"]}), dialer=dialer)
    from agentvisor.net.client import Fetcher

    with pytest.raises((NetworkBlocked, PolicyDenied)):
        Fetcher(access).request("GET", url, tool=tool)
    assert dialer.dialed == []


def test_preview_agrees_with_admission_without_asking() -> None:
    access = make_access({"127.0.0.1:8080"})
    assert access.preview("http://127.0.0.1:8080/").allowed
    denied = access.preview("http://127.1:8081/")
    assert denied.verdict == "deny" and denied.rule == "guard:internal"
    assert access.preview("file:///etc/passwd").rule == "guard:scheme"
    assert access.preview("https://example.com/", method="POST").verdict == "ask"
    assert access.policy.asked  # the ask was reported, not settled
    resolver = TableResolver({"intranet.example.com": ["10.0.0.7"]})
    assert (
        make_access(resolver=resolver)
        .preview("https://intranet.example.com/", tool="web_extract", resolve=True)
        .verdict
        == "deny"
    )


def test_a_deny_rule_for_an_ipv4_address_holds_for_its_ipv6_spellings() -> None:
    access = make_access(deny={"8.8.8.8:80"})
    for form in _ipv6_forms("8.8.8.8"):
        with pytest.raises(PolicyDenied, match="test rule denies"):
            access.admit_url(f"http://[{form}]/", tool="web_extract", resolve=False)
    # Control: another address in the same spelling is allowed.
    assert access.admit_url(
        "http://[::ffff:8.8.4.4]/", tool="web_extract", resolve=False
    ).decision.allowed


def test_an_ask_left_unsettled_refuses_the_fetch() -> None:
    """Fail closed: an approval channel that answers neither allow nor deny refuses."""
    from agentvisor.net.access import NetworkAccess

    access = NetworkAccess(
        RulesPolicy(), Guard(resolver=TableResolver()), resolve_ask=lambda a, c, d: d
    )
    with pytest.raises(PolicyDenied, match="no rule allows this fetch"):
        access.admit_url("https://example.com/", tool="http_request")
