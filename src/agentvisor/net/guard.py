"""The destination guard: the one piece of code every host-side network path uses.

It answers three questions, each without trusting the one before:

1. *What does this URL mean?* `parse_url` reads a URL strictly: http/https only, no
   userinfo, no control characters, the host percent-decoded, Unicode-normalised,
   IDNA-encoded and lower-cased, and every numeric IPv4 spelling (``127.1``,
   ``0x7f000001``, ``017700000001``, ``2130706433``) read the way browsers and libc
   read it, so ``a@b``-style tricks cannot make two parsers disagree on the host.
2. *Where does it lead?* `Guard.resolve` looks the name up once and classifies
   **every** address (`classify_ip`): IPv6 forms that embed an IPv4 address
   (mapped, compatible, NAT64, 6to4) are judged by the embedded address.
3. *Connect where?* `Guard.connect` dials only addresses that were checked, so a
   second DNS answer (rebinding) is never used.

Stdlib only: ``agentvisor exec --network proxy`` imports this.
"""

from __future__ import annotations

import ipaddress
import socket
import unicodedata
from collections.abc import Callable, Iterable, Sequence

from ..errors import NetworkBlocked
from ..records import Declared, Default

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# (name, network) pairs an address is checked against; the first match names the reason.
# Kept as data so docs/network.md and the tests can list it.
BLOCKED_RANGES: tuple[tuple[str, str], ...] = (
    ("unspecified", "0.0.0.0/8"),
    ("loopback", "127.0.0.0/8"),
    ("private", "10.0.0.0/8"),
    ("private", "172.16.0.0/12"),
    ("private", "192.168.0.0/16"),
    ("carrier-grade NAT", "100.64.0.0/10"),
    ("link-local", "169.254.0.0/16"),
    ("IETF protocol assignments", "192.0.0.0/24"),
    ("documentation", "192.0.2.0/24"),
    ("documentation", "198.51.100.0/24"),
    ("documentation", "203.0.113.0/24"),
    ("benchmarking", "198.18.0.0/15"),
    ("multicast", "224.0.0.0/4"),
    ("reserved", "240.0.0.0/4"),
    ("unspecified", "::/128"),
    ("loopback", "::1/128"),
    ("unique-local", "fc00::/7"),
    ("link-local", "fe80::/10"),
    ("site-local", "fec0::/10"),
    ("multicast", "ff00::/8"),
    ("local-use NAT64", "64:ff9b:1::/48"),
    ("discard-only", "100::/64"),
    ("Teredo", "2001::/32"),
    ("documentation", "2001:db8::/32"),
)

# Cloud metadata endpoints: refused outright, no rule can allow them.
METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack, ...
        ipaddress.ip_address("169.254.170.2"),  # AWS ECS task credentials
        ipaddress.ip_address("169.254.169.123"),  # AWS time sync
        ipaddress.ip_address("169.254.169.250"),  # Alibaba
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud metadata
        ipaddress.ip_address("fd00:ec2::254"),  # AWS IPv6 IMDS
        ipaddress.ip_address("fd00:ec2::23"),  # AWS Pod Identity
    }
)
METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "metadata.azure.internal",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.platformequinix.com",
        "metadata.tencentyun.com",
        "metadata.packet.net",
    }
)
# Names that mean "this machine or its private network" whatever DNS says.
INTERNAL_SUFFIXES = (
    "localhost",
    "localdomain",
    "local",
    "internal",
    "intranet",
    "lan",
    "home.arpa",
    "corp",
    "home",
    "private",
)
INTERNAL_NAMES = frozenset({"ip6-localhost", "ip6-loopback"})

_NETWORKS = tuple((reason, ipaddress.ip_network(net)) for reason, net in BLOCKED_RANGES)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_COMPAT = ipaddress.ip_network("::/96")
_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
_6TO4 = ipaddress.ip_network("2002::/16")
_HOST_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-_.")
# Dots that IDNA (UTS #46) maps to "." — normalised before the numeric check.
_DOTS = str.maketrans({"\u3002": ".", "\uff0e": ".", "\uff61": "."})

Resolver = Callable[[str, int], Sequence[str]]
Dialer = Callable[[str, int, float], socket.socket]


class Target(Declared):
    """A URL (or CONNECT ``host:port``) read strictly. ``host`` is normalised ASCII."""

    scheme: str
    host: str
    port: int
    path: str = "/"  # path and query, fragment dropped
    ip: IPAddress | None = None  # set when the host is an address literal

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = {"http": 80, "https": 443}.get(self.scheme)
        return host if self.port == default else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.authority}{self.path}"

    @property
    def hostport(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


class Resolved(Declared):
    """A target with the addresses it was checked against; connect only to these."""

    target: Target
    addresses: tuple[str, ...]
    # Why the destination counts as internal (empty: every address is public).
    internal: tuple[str, ...] = Default(factory=tuple)


def blocked(message: str, destination: str, rule: str = "guard") -> NetworkBlocked:
    return NetworkBlocked(message, destination=destination, rule=rule)


# --- parsing ---------------------------------------------------------------------------


def parse_url(url: str) -> Target:
    """Read an http(s) URL strictly; anything ambiguous raises `NetworkBlocked`."""
    shown = _shorten(url)
    # WHATWG strips leading/trailing C0 controls and spaces, and tabs/newlines anywhere;
    # other parsers do not. Refusing them keeps every parser on the same host.
    url = url.strip(
        "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"
        "\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f "
    )
    if any(ord(c) < 0x21 or ord(c) == 0x7F for c in url):
        raise blocked(f"refused {shown}: the URL contains whitespace or control characters", shown)
    scheme, sep, rest = url.partition(":")
    scheme = scheme.lower()
    if not sep or scheme not in ("http", "https"):
        raise blocked(
            f"refused {shown}: only http and https URLs can be fetched (got scheme {scheme!r})",
            shown,
            "guard:scheme",
        )
    if not rest.startswith("//"):
        raise blocked(f"refused {shown}: not an absolute http(s) URL", shown)
    rest = rest[2:]
    end = len(rest)
    for stop in "/?#\\":
        index = rest.find(stop)
        if index != -1:
            end = min(end, index)
    authority, tail = rest[:end], rest[end:]
    if tail.startswith("\\"):
        raise blocked(
            f"refused {shown}: a backslash after the host is read differently "
            "by browsers and servers",
            shown,
        )
    if "@" in authority:
        raise blocked(
            f"refused {shown}: URLs with a user name or password (user@host) are "
            "not accepted; send credentials as a header with a secret placeholder",
            shown,
            "guard:userinfo",
        )
    host_text, port = _split_port(authority, scheme, shown)
    host, ip = normalise_host(host_text, shown)
    path = tail.split("#", 1)[0]
    if path.startswith("?"):
        path = "/" + path
    return Target(scheme=scheme, host=host, port=port, path=path or "/", ip=ip)


def parse_hostport(value: str) -> Target:
    """A CONNECT target ``host:port`` (port required), read like a URL's authority."""
    shown = _shorten(value)
    if (
        "@" in value
        or any(c in value for c in "/?#\\")
        or any(ord(c) < 0x21 or ord(c) == 0x7F for c in value)
    ):
        raise blocked(f"refused {shown}: not a host:port", shown)
    host_text, port = _split_port(value, "", shown)
    if port == 0:
        raise blocked(f"refused {shown}: a port is required", shown)
    host, ip = normalise_host(host_text, shown)
    return Target(scheme="https" if port == 443 else "tcp", host=host, port=port, ip=ip)


def _split_port(authority: str, scheme: str, shown: str) -> tuple[str, int]:
    default = {"http": 80, "https": 443}.get(scheme, 0)
    if authority.startswith("["):
        close = authority.find("]")
        if close == -1:
            raise blocked(f"refused {shown}: unterminated IPv6 address", shown)
        host, rest = authority[: close + 1], authority[close + 1 :]
        if rest and not rest.startswith(":"):
            raise blocked(f"refused {shown}: unexpected text after the IPv6 address", shown)
        port_text = rest[1:] if rest else ""
    else:
        host, _, port_text = authority.partition(":")
        if ":" in port_text:
            raise blocked(f"refused {shown}: more than one ':' in the host", shown)
    if port_text == "":
        return host, default
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise blocked(f"refused {shown}: invalid port {port_text!r}", shown)
    return host, int(port_text)


def normalise_host(text: str, shown: str) -> tuple[str, IPAddress | None]:
    """The canonical ASCII form of a host and, for address literals, the address."""
    if text.startswith("[") and text.endswith("]"):
        inner = text[1:-1]
        if "%" in inner:
            raise blocked(f"refused {shown}: IPv6 zone identifiers are not accepted", shown)
        try:
            ip6 = ipaddress.IPv6Address(inner)
        except ValueError:
            raise blocked(f"refused {shown}: invalid IPv6 address {inner!r}", shown) from None
        return str(ip6), ip6
    host = _percent_decode(text, shown)
    if not host:
        raise blocked(f"refused {shown}: the URL has no host", shown)
    if not host.isascii():
        host = unicodedata.normalize("NFKC", host).translate(_DOTS)
    host = host.lower()
    if host.endswith("."):
        host = host[:-1]
    ip4 = _parse_ipv4(host, shown)
    if ip4 is not None:
        return str(ip4), ip4
    if not host.isascii():
        host = _idna(host, shown)
        ip4 = _parse_ipv4(host, shown)
        if ip4 is not None:
            return str(ip4), ip4
    if not host or any(c not in _HOST_CHARS for c in host) or "" in host.split("."):
        raise blocked(f"refused {shown}: {host!r} is not a valid host name", shown)
    if any(len(label) > 63 for label in host.split(".")) or len(host) > 253:
        raise blocked(f"refused {shown}: the host name is too long", shown)
    return host, None


def _percent_decode(text: str, shown: str) -> str:
    if "%" not in text:
        return text
    from urllib.parse import unquote_to_bytes

    try:
        decoded = unquote_to_bytes(text).decode("utf-8")
    except UnicodeDecodeError:
        raise blocked(
            f"refused {shown}: the host is not valid percent-encoded UTF-8", shown
        ) from None
    if "%" in decoded:
        raise blocked(f"refused {shown}: the host is percent-encoded twice", shown)
    return decoded


def _idna(host: str, shown: str) -> str:
    import idna  # IDNA 2008 with the UTS #46 mapping; the stdlib codec is IDNA 2003 only

    try:
        return idna.encode(host, uts46=True).decode("ascii").lower()
    except idna.IDNAError as exc:
        raise blocked(
            f"refused {shown}: {host!r} is not a valid internationalised host name ({exc})", shown
        ) from None


def _parse_ipv4(host: str, shown: str) -> ipaddress.IPv4Address | None:
    """The WHATWG IPv4 parser (which libc's inet_aton agrees with): if the last label is
    numeric the host is an address, in any of 1-4 parts, decimal, octal or hex."""
    parts = host.split(".")
    if not parts or not _is_number(parts[-1]):
        return None
    if len(parts) > 4:
        raise blocked(f"refused {shown}: {host!r} is not a valid IPv4 address", shown)
    numbers = []
    for part in parts:
        value = _ipv4_number(part)
        if value is None:
            raise blocked(f"refused {shown}: {host!r} is not a valid IPv4 address", shown)
        numbers.append(value)
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (5 - len(numbers)):
        raise blocked(f"refused {shown}: {host!r} is out of the IPv4 range", shown)
    value = last
    for index, n in enumerate(head):
        value += n << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _is_number(label: str) -> bool:
    if label.lower().startswith("0x"):
        return all(c in "0123456789abcdef" for c in label[2:].lower())
    return label != "" and label.isascii() and label.isdigit()


def _ipv4_number(part: str) -> int | None:
    if not part:
        return None
    base, digits = 10, part
    if part.lower().startswith("0x"):
        base, digits = 16, part[2:] or "0"
    elif len(part) > 1 and part.startswith("0"):
        base, digits = 8, part[1:]
    try:
        return int(digits, base) if digits.isascii() and digits.isalnum() else None
    except ValueError:
        return None


def _shorten(text: str, limit: int = 200) -> str:
    text = text.encode("unicode_escape").decode("ascii") if not text.isprintable() else text
    return text if len(text) <= limit else text[:limit] + "..."


# --- classification --------------------------------------------------------------------


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for, if it is one of the translating forms."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _TRANSLATED or ip in _NAT64 or (ip in _COMPAT and int(ip) > 1):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _6TO4:
        return ip.sixtofour
    return None


def is_metadata(ip: IPAddress) -> bool:
    if ip in METADATA_ADDRESSES:
        return True
    inner = embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    return inner is not None and inner in METADATA_ADDRESSES


def classify_ip(ip: IPAddress) -> str | None:
    """Why an address is not a public destination, or None when it is."""
    if isinstance(ip, ipaddress.IPv6Address):
        inner = embedded_ipv4(ip)
        if inner is not None:
            reason = classify_ip(inner)
            return f"{reason} (IPv4 inside IPv6 {ip})" if reason else None
        if ip.scope_id:
            return "link-local (scoped)"
    for reason, network in _NETWORKS:
        if ip.version == network.version and ip in network:
            return reason
    if not ip.is_global:  # the IANA special-purpose registries, as Python knows them
        return "special-purpose"
    return None


def host_name_reason(host: str) -> str | None:
    """Why a host *name* means an internal destination whatever it resolves to."""
    if host in METADATA_NAMES:
        return "cloud metadata name"
    if host in INTERNAL_NAMES or "." not in host:
        return "single-label or local name"
    for suffix in INTERNAL_SUFFIXES:
        if host == suffix or host.endswith("." + suffix):
            return f"internal name (.{suffix})"
    return None


# --- resolution and connection ---------------------------------------------------------


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


def system_dialer(address: str, port: int, timeout: float) -> socket.socket:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((address, port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except BaseException:
        sock.close()
        raise
    return sock


class Guard:
    """Resolves and dials destinations; the resolver and dialer are injectable for tests."""

    def __init__(
        self,
        resolver: Resolver | None = None,
        dialer: Dialer | None = None,
        extra_blocked: Iterable[str] = (),
    ) -> None:
        self._resolver = resolver or system_resolver
        self._dialer = dialer or system_dialer
        self._extra = tuple(ipaddress.ip_network(net, strict=False) for net in extra_blocked)

    def reason(self, ip: IPAddress) -> str | None:
        for network in self._extra:
            if ip.version == network.version and ip in network:
                return f"blocked by network.block ({network})"
        return classify_ip(ip)

    def refuse_hardline(self, target: Target) -> None:
        """Destinations no rule may allow: cloud metadata endpoints."""
        if (target.ip is not None and is_metadata(target.ip)) or target.host in METADATA_NAMES:
            raise blocked(
                f"refused {target.hostport}: cloud metadata endpoints are never reachable",
                target.hostport,
                "guard:metadata",
            )

    def pre_resolve_internal(self, target: Target) -> str | None:
        """Internal-ness known before any lookup (address literal or local name)."""
        if target.ip is not None:
            return self.reason(target.ip)
        return host_name_reason(target.host)

    def resolve(self, target: Target) -> Resolved:
        """Look the host up once and classify every address it has."""
        self.refuse_hardline(target)
        if target.ip is not None:
            addresses = [str(target.ip)]
        else:
            try:
                addresses = list(self._resolver(target.host, target.port))
            except (OSError, UnicodeError) as exc:
                raise blocked(
                    f"refused {target.hostport}: the host name does not resolve ({exc})",
                    target.hostport,
                    "guard:dns",
                ) from None
            if not addresses:
                raise blocked(
                    f"refused {target.hostport}: the host name has no address",
                    target.hostport,
                    "guard:dns",
                )
        internal = []
        name_reason = host_name_reason(target.host) if target.ip is None else None
        if name_reason:
            internal.append(f"{target.host}: {name_reason}")
        for text in addresses:
            try:
                ip = ipaddress.ip_address(text.split("%", 1)[0])
            except ValueError:
                raise blocked(
                    f"refused {target.hostport}: the resolver returned {text!r}, not an address",
                    target.hostport,
                    "guard:dns",
                ) from None
            if is_metadata(ip):
                raise blocked(
                    f"refused {target.hostport}: it resolves to the cloud metadata address {ip}",
                    target.hostport,
                    "guard:metadata",
                )
            reason = self.reason(ip)
            if reason:
                internal.append(f"{ip}: {reason}")
        return Resolved(target=target, addresses=tuple(addresses), internal=tuple(internal))

    def connect(self, resolved: Resolved, timeout: float) -> socket.socket:
        """Dial the checked addresses in order; never look the name up again."""
        errors = []
        for address in resolved.addresses:
            try:
                return self._dialer(address, resolved.target.port, timeout)
            except OSError as exc:
                errors.append(f"{address}: {exc.strerror or exc}")
        raise ConnectionError(f"cannot connect to {resolved.target.hostport} ({'; '.join(errors)})")
