"""Whether a host name or address stays on this machine: the MCP server and the
dashboard skip the bearer token and the login only for a loopback bind or client."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1); a name that is
    not an address counts as remote (fail closed: it could resolve anywhere)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
