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
from agentvisor.records import replace
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


def test_the_relay_serves_hundreds_of_concurrent_connections(
    workspace: Path, proxy: EgressProxy, server: Server
) -> None:
    """300 connections held open at once inside the sandbox, each with a request in
    flight: the relay (one thread, an event loop) serves every one, where a thread per
    direction ran into the sandbox's pid limit and stopped accepting."""
    code = f"""
    import socket
    request = b"GET {server.url("/", host="plain.test")} HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n"
    conns = [socket.create_connection(("127.0.0.1", 3128), timeout=60) for _ in range(300)]
    for c in conns:
        c.sendall(request)
    statuses = []
    for c in conns:
        reply = b""
        while b"hello from the test server" not in reply and b"\\r\\n\\r\\n" not in reply[:0]:
            data = c.recv(65536)
            if not data:
                break
            reply += data
        statuses.append(reply.split(b" ", 2)[1].decode() if reply else "none")
    print("statuses", sorted(set(statuses)), statuses.count("200"))
    for c in conns:
        c.close()
    """
    result = run_inside(workspace, proxy, code, probe=False)
    assert "statuses ['200'] 300" in out(result), out(result)[-2000:]


def test_a_sandboxed_client_gets_the_key_injected_and_finds_it_nowhere(
    workspace: Path, server: Server, ca: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 18: the program inside holds a placeholder; the proxy terminates TLS with the
    run CA (trusted inside through SSL_CERT_FILE), puts the key in toward its host only,
    and verifies the real server. A probe in the same sandbox looks for the key."""
    import ssl as ssl_module

    from agentvisor.net.secrets import Secret, SecretStore

    token = "sk-sandbox-run-0123456789abcdef"
    monkeypatch.setenv("RUN_KEY", token)
    context = ssl_module.create_default_context(ssl_module.Purpose.CLIENT_AUTH)
    ca.issue_cert("api.test").configure_cert(context)
    api = Server(tls=context)
    upstream_ca = tmp_path / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(upstream_ca))
    access = make_access(
        {f"api.test:{api.port}"}, resolver=TableResolver({"api.test": ["127.0.0.1"]})
    )
    store = SecretStore([Secret("API_KEY", (f"api.test:{api.port}",), env="RUN_KEY")])
    try:
        with EgressProxy(access, timeout=10, secrets=store, ca_file=str(upstream_ca)) as proxy:
            code = f"""
            import glob, os, urllib.request
            os.environ["API_KEY"] = "{{{{secret:API_KEY}}}}"
            req = urllib.request.Request("https://api.test:{api.port}/echo",
                headers={{"Authorization": "Bearer " + os.environ["API_KEY"]}})
            with urllib.request.urlopen(req, timeout=20) as r:
                print("status", r.status, "echoed-placeholder", b"secret:API_KEY" in r.read())
            found = []
            for path in glob.glob("/proc/*/environ") + glob.glob("/run/agentvisor/*"):
                try:
                    if b"{token}" in open(path, "rb").read():
                        found.append(path)
                except OSError:
                    pass
            found += [k for k, v in os.environ.items() if "{token}" in v]
            print("found", found)
            # A program that reads only the system bundle trusts the run CA too.
            import ssl
            system = ssl.create_default_context(cafile="/etc/ssl/certs/ca-certificates.crt")
            with urllib.request.urlopen(req, timeout=20, context=system) as r:
                print("system-bundle", r.status)
            """
            result = run_inside(workspace, proxy, code, probe=False)
    finally:
        api.close()
    text = out(result)
    assert "status 200 echoed-placeholder True" in text, text
    assert "found []" in text, text
    assert "system-bundle 200" in text, text
    headers = {k.lower(): v for k, v in api.requests[0]["headers"].items()}
    assert headers["authorization"] == f"Bearer {token}"


NODE_CLIENT = r"""
const http = require("http"), tls = require("tls");
const [host, port] = [process.argv[2], Number(process.argv[3])];
const proxy = new URL(process.env.HTTPS_PROXY);
const connect = http.request({host: proxy.hostname, port: proxy.port, method: "CONNECT",
                              path: `${host}:${port}`});
connect.on("connect", (res, socket) => {
  if (res.statusCode !== 200) { console.log("node connect", res.statusCode); }
  // The default CA store, which NODE_EXTRA_CA_CERTS extends with the run CA.
  const stream = tls.connect({socket, servername: host}, () => {
    stream.write(`GET /echo HTTP/1.1\r\nHost: ${host}\r\n` +
                 `Authorization: Bearer ${process.env.API_KEY}\r\nConnection: close\r\n\r\n`);
  });
  let reply = "";
  stream.on("data", (d) => { reply += d; });
  stream.on("end", () => console.log("node", reply.split("\r\n")[0],
                                     reply.includes("{{secret:API_KEY}}")));
  stream.on("error", (e) => console.log("node error", e.message));
});
connect.end();
"""


@pytest.mark.skipif(not os.path.exists("/usr/bin/node"), reason="needs Node.js at /usr/bin/node")
def test_a_plain_node_client_trusts_the_run_ca_through_node_extra_ca_certs(
    workspace: Path, ca: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ssl as ssl_module

    from agentvisor.net.secrets import Secret, SecretStore

    token = "sk-node-run-0123456789abcdef"
    monkeypatch.setenv("RUN_KEY", token)
    context = ssl_module.create_default_context(ssl_module.Purpose.CLIENT_AUTH)
    ca.issue_cert("api.test").configure_cert(context)
    api = Server(tls=context)
    upstream_ca = tmp_path / "upstream-ca.pem"
    ca.cert_pem.write_to_path(str(upstream_ca))
    access = make_access(
        {f"api.test:{api.port}"}, resolver=TableResolver({"api.test": ["127.0.0.1"]})
    )
    store = SecretStore([Secret("API_KEY", (f"api.test:{api.port}",), env="RUN_KEY")])
    (workspace / "client.js").write_text(NODE_CLIENT)
    try:
        with EgressProxy(access, timeout=10, secrets=store, ca_file=str(upstream_ca)) as proxy:
            sandbox = Sandbox(SandboxConfig(network="proxy"), workspace=workspace)
            attachment = proxy.attachment()
            attachment = replace(
                attachment, env={**attachment.env, "API_KEY": "{{secret:API_KEY}}"}
            )
            argv = ["/usr/bin/node", "client.js", "api.test", str(api.port)]
            result = sandbox.run(argv, timeout=60, attachment=attachment)
            # Control: without NODE_EXTRA_CA_CERTS, Node does not trust the run CA.
            untrusting = replace(
                attachment,
                env={k: v for k, v in attachment.env.items() if k != "NODE_EXTRA_CA_CERTS"},
            )
            control = sandbox.run(argv, timeout=60, attachment=untrusting)
    finally:
        api.close()
    assert "node HTTP/1.1 200 OK true" in out(result), out(result)
    assert "node error" in out(control) and "certificate" in out(control), out(control)
    assert len(api.requests) == 1
    headers = {k.lower(): v for k, v in api.requests[0]["headers"].items()}
    assert headers["authorization"] == f"Bearer {token}"
