"""sandbox.network: proxy in a container: the egress proxy is the only way out."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentvisor.net.proxy import EgressProxy

from ..net.helpers import Server, TableResolver, make_access
from .helpers import sandbox, text

PROBE = textwrap.dedent("""
    import os, socket, urllib.request, urllib.error
    def get(url):
        try:
            with urllib.request.urlopen(url, timeout=20) as r:
                return f"{r.status} {r.read().decode().strip()}"
        except urllib.error.HTTPError as e:
            return f"{e.code} {e.headers.get('x-agentvisor-reason', '')}"
        except Exception as e:
            return f"error {type(e).__name__}"
    print("allowed", get("http://plain.test:{port}/"))
    print("denied", get("http://other.test:{port}/"))
    try:
        socket.create_connection(("127.0.0.1", {port}), timeout=2); print("direct reached")
    except OSError:
        print("direct blocked")
""")


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


def test_proxy_is_the_only_way_out(ws: Path, server: Server) -> None:
    resolver = TableResolver({"plain.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]})
    access = make_access({f"plain.test:{server.port}"}, resolver=resolver)
    with EgressProxy(access, timeout=10) as proxy:
        box = sandbox(ws, network="proxy")
        result = box.run(
            ["python3", "-c", PROBE.replace("{port}", str(server.port))],
            attachment=proxy.attachment(),
            timeout=60,
        )
    out = text(result)
    assert "allowed 200 hello from the test server" in out, out
    assert "denied 403" in out, out
    assert "direct blocked" in out, out
    # Control: without the proxy attached the same request has no route at all.
    bare = sandbox(ws).run(["python3", "-c", PROBE.replace("{port}", str(server.port))])
    assert "allowed error" in text(bare), text(bare)
