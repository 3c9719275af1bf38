"""Hosts in URLs and arguments, and whether an address is the machine itself, a private
network or a cloud metadata service. Numeric tricks (``127.1``, ``2130706433``,
``0x7f000001``, ``[::ffff:127.0.0.1]``) are normalised before they are judged."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from .lazyre import regex

_NUMERIC_V4 = r"^(0x[0-9a-f]+|\d+)(\.(0x[0-9a-f]+|\d+)){0,3}$"  # with re.I
_METADATA_IPS = frozenset(
    {"169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254", "169.254.169.253"}
)
_METADATA_NAMES = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "instance-data",
        "instance-data.ec2.internal",
        "metadata.azure.com",
    }
)
_INTERNAL_SUFFIXES = (
    ".internal",
    ".local",
    ".lan",
    ".home.arpa",
    ".intranet",
    ".corp",
    ".localdomain",
)
_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_URL_RE = r"^[a-zA-Z][a-zA-Z0-9+.-]*://"
_SCP_RE = r"^(?:[^@/:\s]+@)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+):(?!//)"
_HOSTPORT_RE = r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)(?::(\d+))?(/.*)?$"


def normalize_host(host: str) -> str:
    """Lower-case, no brackets, no trailing dot, numeric IPv4 forms in dotted quads."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if regex(_NUMERIC_V4, re.I).match(host):
        import socket  # here: importing it costs `agentvisor exec` a millisecond and more

        try:
            return socket.inet_ntoa(socket.inet_aton(host))
        except OSError:
            return host
    return host


def classify(host: str) -> str | None:
    """``loopback``, ``private``, ``link-local``, ``metadata`` or ``internal`` (a name
    only a local network resolves); None for a public host."""
    host = normalize_host(host)
    if not host:
        return None
    if host in _METADATA_NAMES or host in _METADATA_IPS:
        return "metadata"
    if host == "localhost" or host.endswith(".localhost"):
        return "loopback"
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return "internal" if host.endswith(_INTERNAL_SUFFIXES) else None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if str(ip) in _METADATA_IPS:
        return "metadata"
    if ip.is_loopback or ip.is_unspecified:
        return "loopback"
    if ip.is_link_local:
        return "link-local"
    if ip.is_private or ip in _CGNAT or ip.is_reserved or ip.is_multicast:
        return "private"
    return None


def split_target(target: str) -> tuple[str, str, int | None]:
    """A fetch target (URL or ``host[:port]``) → (scheme, host, port or None)."""
    if regex(_URL_RE).match(target):
        parts = urlsplit(target)
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"{target!r}: bad port") from exc
        return parts.scheme.lower(), normalize_host(parts.hostname or ""), port
    m = regex(_HOSTPORT_RE).match(target)
    if not m:
        raise ValueError(f"{target!r} is not a URL or host[:port]")
    return "", normalize_host(m.group(1)), int(m.group(2)) if m.group(2) else None


def default_port(scheme: str) -> int | None:
    return {"http": 80, "https": 443, "ws": 80, "wss": 443, "ftp": 21}.get(scheme)


def hosts_in(arg: str) -> list[str]:
    """Hosts an argument of a network program names (URL, user@host:path, host:port,
    an address or a CIDR range)."""
    arg = arg.strip()
    if not arg:
        return []
    if regex(_URL_RE).match(arg):
        try:
            host = urlsplit(arg).hostname
        except ValueError:
            return []
        return [normalize_host(host)] if host else []
    if "=" in arg and not arg.startswith("="):
        return hosts_in(arg.split("=", 1)[1])
    m = regex(_SCP_RE).match(arg)
    if m and not arg.startswith("/"):
        return [normalize_host(m.group(1))]
    if "@" in arg:
        arg = arg.rsplit("@", 1)[1]
    cidr = re.match(r"^([0-9.]+|[0-9a-fA-F:]+)/\d{1,3}$", arg)
    if cidr:
        return [normalize_host(cidr.group(1))]
    m = regex(_HOSTPORT_RE).match(arg)
    if m and not m.group(3):
        host = m.group(1)
        if host.isdigit():
            return []  # a count, a port, a depth: `-n 5` is not 0.0.0.5 (in a URL it is)
        if (
            "." in host
            or host.startswith("[")
            or host.lower() == "localhost"
            or regex(_NUMERIC_V4, re.I).match(host)
        ):
            return [normalize_host(host)]
    return []
