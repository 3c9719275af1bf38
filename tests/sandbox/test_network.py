"""No network: the sandbox has its own network namespace with only loopback."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator

import pytest

from tests.conftest import requires_bwrap
from tests.sandbox.helpers import py_inside, py_outside, text

pytestmark = requires_bwrap


@pytest.fixture
def tcp_listener() -> Iterator[tuple[int, list[str]]]:
    hits: list[str] = []
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def accept() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            hits.append("tcp")
            conn.close()

    threading.Thread(target=accept, daemon=True).start()
    yield server.getsockname()[1], hits
    server.close()


CONNECT = """
import socket, sys
try:
    socket.create_connection(("{host}", {port}), 2); print("CONNECTED")
except OSError as e:
    print("refused", e)
"""


def test_host_loopback_tcp_unreachable(workspace, tcp_listener):
    port, hits = tcp_listener
    probe = CONNECT.format(host="127.0.0.1", port=port)
    assert "CONNECTED" in py_outside(probe).stdout  # control
    hits.clear()
    result = py_inside(workspace, probe)
    assert "CONNECTED" not in text(result)
    assert hits == []


def test_host_addresses_unreachable(workspace, tcp_listener):
    port, _ = tcp_listener
    addresses = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, socket.AF_INET)}
    for addr in addresses - {"127.0.0.1"}:
        result = py_inside(workspace, CONNECT.format(host=addr, port=port))
        assert "CONNECTED" not in text(result)


def test_only_loopback_interface(workspace):
    probe = "import socket; print(sorted(n for _, n in socket.if_nameindex()))"
    result = py_inside(workspace, probe)
    assert text(result).strip() == "['lo']"


def test_dns_does_not_resolve(workspace):
    probe = (
        "import socket\ntry:\n print(socket.gethostbyname('pypi.org'))\n"
        "except OSError: print('nodns')"
    )
    assert text(py_inside(workspace, probe)).strip() == "nodns"


def test_abstract_unix_socket_unreachable(workspace):
    name = "agentvisor-test-" + os.urandom(4).hex()
    server = socket.socket(socket.AF_UNIX)
    server.bind("\0" + name)
    server.listen()
    probe = f"""
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\\0{name}"); print("CONNECTED")
except OSError as e:
    print("refused", e)
"""
    try:
        assert "CONNECTED" in py_outside(probe).stdout  # control
        assert "CONNECTED" not in text(py_inside(workspace, probe))
    finally:
        server.close()


def test_unix_socket_outside_workspace_invisible(workspace, tmp_path):
    path = tmp_path / "host.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    probe = f"""
import socket
s = socket.socket(socket.AF_UNIX)
try:
    s.connect({str(path)!r}); print("CONNECTED")
except OSError as e:
    print("refused", e)
"""
    try:
        assert "CONNECTED" in py_outside(probe).stdout  # control
        assert "CONNECTED" not in text(py_inside(workspace, probe))
    finally:
        server.close()


def test_udp_to_host_not_delivered(workspace):
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(1)
    port = server.getsockname()[1]
    probe = f"""
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(b"x", ("127.0.0.1", {port}))
except OSError as e:
    print(e)
"""
    py_outside(probe)
    assert server.recvfrom(10)[0] == b"x"  # control
    py_inside(workspace, probe)
    with pytest.raises(TimeoutError):
        server.recvfrom(10)
    server.close()
