"""An HTTP upstream is dialed at exactly the address the destination guard checked.

The system resolver is replaced by a rebinding one for one name: its first answer (the
one the guard checks) is public, every later one is loopback. Only the guard's dialer
may open connections, and the test dialer dials loopback alone, so nothing leaves the
machine.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

import agentvisor.net.guard
from tests.net.helpers import PUBLIC_IP, LoopbackOnlyDialer, Server
from tests.upstreams.conftest import HERE, upstream_gateway
from tests.upstreams.test_upstreams import _wait_for_port, over_mcp, text

REBIND = "mcp.rebind.test"
ALLOW_TOOLS = {"decision": "allow", "kind": "tool", "pattern": "remote__*"}
# A wildcard rule admits public addresses of the name, never an internal one.
ALLOW_PUBLIC = {"decision": "allow", "kind": "fetch", "pattern": f"*.{REBIND.split('.', 1)[1]}"}


class RebindingDNS:
    """``socket.getaddrinfo`` answering ``REBIND`` with ``answers`` in turn (the last one
    repeats); every other name as the system answers it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, answers: list[str]) -> None:
        self.answers = answers
        self.lookups = 0
        real = socket.getaddrinfo

        def getaddrinfo(host: str | bytes | None, port: object, *args, **kwargs):
            name = host.decode() if isinstance(host, bytes) else host
            if name != REBIND:
                return real(host, port, *args, **kwargs)
            address = self.answers[min(self.lookups, len(self.answers) - 1)]
            self.lookups += 1
            return real(address, port, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture
def dialer(monkeypatch: pytest.MonkeyPatch) -> LoopbackOnlyDialer:
    """The dialer of every `Guard` the gateway builds."""
    dialer = LoopbackOnlyDialer()
    monkeypatch.setattr(agentvisor.net.guard, "system_dialer", dialer)
    return dialer


@pytest.fixture
def internal() -> Iterator[Server]:
    """The internal service a rebinding answer points at; it counts connections."""
    server = Server()
    yield server
    server.close()


def test_a_rebinding_answer_is_never_dialed(
    monkeypatch, dialer, internal, workspace, tmp_path, isolated_home
):
    dns = RebindingDNS(monkeypatch, [PUBLIC_IP, "127.0.0.1"])
    entry = {"name": "remote", "url": f"http://{REBIND}:{internal.port}/mcp"}
    rules = [ALLOW_TOOLS, ALLOW_PUBLIC]
    with upstream_gateway(workspace, tmp_path, [entry], rules=rules) as (_, up):
        assert "remote" not in up.clients
    assert internal.connections == 0
    assert dialer.dialed and set(dialer.dialed) == {(PUBLIC_IP, internal.port)}
    # Control: a client that looks the name up again (as one without the pin does) is
    # led by the next answer to the internal service.
    import httpx2

    assert httpx2.get(f"http://{REBIND}:{internal.port}/mcp", trust_env=False).status_code
    assert internal.connections == 1 and dns.lookups >= 2


def test_control_a_loopback_answer_at_the_check_is_refused(
    monkeypatch, dialer, internal, workspace, tmp_path, isolated_home
):
    RebindingDNS(monkeypatch, ["127.0.0.1"])
    entry = {"name": "remote", "url": f"http://{REBIND}:{internal.port}/mcp"}
    rules = [ALLOW_TOOLS, ALLOW_PUBLIC]
    with upstream_gateway(workspace, tmp_path, [entry], rules=rules) as (_, up):
        assert "remote" not in up.clients
    assert dialer.dialed == [] and internal.connections == 0


def test_control_the_pinned_client_reaches_an_allowed_server_by_name(
    monkeypatch, dialer, workspace, tmp_path, isolated_home
):
    """The same name, resolved to loopback and allowed by an exact rule: the pinned
    client speaks MCP to the server at the address the guard checked."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    description = tmp_path / "echo.txt"
    description.write_text("Echo the text back")
    script = str(HERE / "probe_server.py")
    argv = [sys.executable, script, str(description), "--http", str(port), REBIND]
    server = subprocess.Popen(argv)
    try:
        _wait_for_port(port)
        RebindingDNS(monkeypatch, ["127.0.0.1"])
        entry = {"name": "remote", "url": f"http://{REBIND}:{port}/mcp"}
        exact = {"decision": "allow", "kind": "fetch", "pattern": f"{REBIND}:{port}"}
        with upstream_gateway(workspace, tmp_path, [entry], rules=[ALLOW_TOOLS, exact]) as (gw, _):
            _, [result] = over_mcp(gw, [("remote__echo", {"text": "pinned"})])
            assert text(result) == "pinned"
        assert dialer.dialed and set(dialer.dialed) == {("127.0.0.1", port)}
    finally:
        server.terminate()
        server.wait(10)
