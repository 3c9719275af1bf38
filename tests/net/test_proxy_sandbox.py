"""The egress proxy with the real bwrap sandbox: the proxy is the only way out."""

from __future__ import annotations

import os
import socket
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentvisor.config import SandboxConfig
from agentvisor.net.proxy import EgressProxy
from agentvisor.sandbox import Result, Sandbox

from ..conftest import requires_bwrap
from .helpers import Server, TableResolver, make_access

pytestmark = requires_bwrap


@pytest.fixture
def proxy(server: Server, tls_server: Server) -> Iterator[EgressProxy]:
    # Loopback inside the sandbox is the sandbox's own (NO_PROXY), so the host's loopback
    # servers are reached by names that the proxy's resolver maps to 127.0.0.1.
    resolver = TableResolver(
        {"secure.test": ["127.0.0.1"], "plain.test": ["127.0.0.1"], "other.test": ["127.0.0.1"]}
    )
    access = make_access(
        {f"plain.test:{server.port}", f"secure.test:{tls_server.port}"}, resolver=resolver
    )
    with EgressProxy(access, timeout=10) as p:
        yield p


def run_inside(workspace: Path, proxy: EgressProxy | None, code: str, probe: bool = True) -> Result:
    sandbox = Sandbox(SandboxConfig(network="proxy"), workspace=workspace)
    attachment = proxy.attachment() if proxy is not None else None
    source = (textwrap.dedent(PROBE) if probe else "") + textwrap.dedent(code)
    return sandbox.run(["python3", "-c", source], timeout=60, attachment=attachment)


def out(result: Result) -> str:
    return (result.stdout + result.stderr).decode(errors="replace")


PROBE = """
    import os, ssl, sys, urllib.request, urllib.error
    def get(url, context=None):
        try:
            with urllib.request.urlopen(url, timeout=20, context=context) as r:
                return f"{r.status} {r.read().decode().strip()}"
        except urllib.error.HTTPError as e:
            return f"{e.code} {e.headers.get('x-agentvisor-reason', '')}"
        except Exception as e:
            return f"error {type(e).__name__}: {e}"
"""


def test_allowed_http_and_https_work_through_the_proxy(
    workspace: Path, proxy: EgressProxy, server: Server, tls_server: Server, ca: Any
) -> None:
    ca.cert_pem.write_to_path(str(workspace / "ca.pem"))
    result = run_inside(
        workspace,
        proxy,
        f"""
    ctx = ssl.create_default_context(cafile="ca.pem")
    print("http", get("{server.url("/", host="plain.test")}"))
    print("https", get("{tls_server.url("/", host="secure.test")}", ctx))
    print("proxy", os.environ["HTTPS_PROXY"], os.environ["http_proxy"])
    """,
    )
    text = out(result)
    assert "http 200 hello from the test server" in text, text
    assert "https 200 hello from the test server" in text, text
    assert "proxy http://127.0.0.1:3128 http://127.0.0.1:3128" in text, text


def test_denied_host_gets_403(workspace: Path, proxy: EgressProxy, tls_server: Server) -> None:
    other = Server()
    try:
        result = run_inside(
            workspace,
            proxy,
            f"""
        print("denied", get("{other.url("/", host="other.test")}"))
        print("tunnel", get("https://other.test:{tls_server.port}/"))
        """,
        )
        assert "denied 403 refused GET http://other.test:" in out(result), out(result)
        assert "tunnel error URLError: <urlopen error Tunnel connection failed: 403" in out(
            result
        ), out(result)
        assert other.connections == 0
    finally:
        other.close()


def test_direct_connections_from_inside_fail(
    workspace: Path, proxy: EgressProxy, server: Server
) -> None:
    probe = f"""
    import socket
    for address in [("127.0.0.1", {server.port}), ("192.0.2.1", 80)]:
        try:
            socket.create_connection(address, timeout=5).close()
            print("connected", address)
        except OSError as e:
            print("failed", address, e.errno)
    """
    result = run_inside(workspace, proxy, probe, probe=False)
    assert "connected" not in out(result) and out(result).count("failed") == 2, out(result)
    # Control: the host's loopback server is reachable from the host itself.
    socket.create_connection(("127.0.0.1", server.port), timeout=5).close()


def test_without_the_proxy_there_is_no_way_out(workspace: Path, server: Server) -> None:
    result = run_inside(
        workspace,
        None,
        f"""
    print("plain", get("{server.url("/", host="plain.test")}"))
    """,
    )
    assert "plain error" in out(result), out(result)


def test_relay_runs_without_a_system_python(workspace: Path, server: Server) -> None:
    """Where /usr/bin/python3 is missing the attachment binds this Python read-only."""
    access = make_access(
        {f"plain.test:{server.port}"}, resolver=TableResolver({"plain.test": ["127.0.0.1"]})
    )
    with EgressProxy(access, timeout=10, python="/nonexistent/python3") as p:
        assert p.attachment().ro_binds
        result = run_inside(
            workspace,
            p,
            f"""
        print("http", get("{server.url("/", host="plain.test")}"))
        """,
        )
    assert "http 200 hello" in out(result), out(result)


EXEC_PROBE = """
import os, ssl, sys, urllib.request, urllib.error
os.environ["NO_PROXY"] = os.environ["no_proxy"] = ""  # reach the host's loopback via the proxy
def get(url, context=None):
    try:
        with urllib.request.urlopen(url, timeout=20, context=context) as r:
            return f"{r.status} {r.read().decode().strip()}"
    except urllib.error.HTTPError as e:
        return f"{e.code} {e.headers.get('x-agentvisor-reason', '')}"
    except Exception as e:
        return f"error {type(e).__name__}: {e}"
ctx = ssl.create_default_context(cafile="ca.pem")
for url in sys.argv[1:]:
    print(url, "->", get(url, ctx if url.startswith("https") else None))
"""


def test_agentvisor_exec_network_proxy(
    workspace: Path, server: Server, tls_server: Server, ca: Any, isolated_home: Path
) -> None:
    """`agentvisor exec --network proxy` starts the proxy with the config's rules."""
    from ..conftest import run_cli

    other = Server()
    try:
        ca.cert_pem.write_to_path(str(workspace / "ca.pem"))
        (workspace / "probe.py").write_text(EXEC_PROBE)
        config = workspace.parent / "agentvisor.yaml"
        config.write_text(f"""
rules:
  - {{decision: allow, kind: fetch, pattern: "127.0.0.1:{server.port}", when: {{tool: proxy}}}}
  - {{decision: allow, kind: fetch, pattern: "127.0.0.1:{tls_server.port}"}}
""")
        urls = [server.url("/"), tls_server.url("/"), other.url("/")]
        done = run_cli(
            "exec",
            "--config",
            str(config),
            "--network",
            "proxy",
            "--workspace",
            str(workspace),
            "--",
            "python3",
            "probe.py",
            *urls,
            cwd=workspace,
            env={**os.environ, "HOME": str(isolated_home)},
        )
        lines = done.stdout.splitlines()
        assert f"{urls[0]} -> 200 hello from the test server" in lines, done
        assert f"{urls[1]} -> 200 hello from the test server" in lines, done
        assert any(line.startswith(f"{urls[2]} -> 403 refused") for line in lines), done
        assert other.connections == 0
    finally:
        other.close()
