"""What the egress proxy costs: direct against through the proxy, on loopback, same run.

    .venv/bin/python benchmarks/proxy_overhead.py [--mb 100] [--requests 1000]

Three processes, as in a real ``--network proxy`` run: an HTTP server, the egress proxy
(`EgressProxy` with the guard and a policy allowing only the server), and the relay
(``relay.py``, as the sandbox runs it); the client is this process. It measures

- a download of --mb megabytes, direct and through the proxy, both for plain-http
  forwarding and for a CONNECT tunnel (the https path; plain HTTP inside the tunnel so
  TLS cost does not hide the proxy's);
- --requests small GETs on one keep-alive connection, direct and through the proxy,
  and reports the added p50/p90 latency per request (plain-http forwarding), and the
  same for a fresh connection per request (the CONNECT/tunnel path pays a new tunnel);
- https to a TLS server three ways (issue 18): direct, through a CONNECT tunnel the
  proxy never decrypts, and terminated by the proxy with its per-run CA (the path
  `agentvisor run` takes toward a secret's host: a key injected in every request and the
  response redacted as it streams): throughput, and p50 of small GETs on one connection.

Targets (issue 4): throughput >= 50% of direct, added p50 <= 2 ms. Only loopback is used.
"""

from __future__ import annotations

import argparse
import http.client
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
CHUNK = 1024 * 1024

SERVER = r"""
import ssl, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
BIG = int(sys.argv[1]) * 1024 * 1024
BLOCK = memoryview(b"x" * (1024 * 1024))
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def log_message(self, *a): pass
    def do_GET(self):
        size = BIG if self.path == "/big" else 2
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        if size == 2:
            self.wfile.write(b"ok")
            return
        sent = 0
        while sent < size:
            n = min(len(BLOCK), size - sent)
            self.wfile.write(BLOCK[:n])
            sent += n
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
if len(sys.argv) > 2:  # a certificate chain and key: serve https
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(sys.argv[2])
    s.socket = context.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"""

PROXY = r"""
import os, sys, tempfile, time
from agentvisor.actions import Decision
from agentvisor.net.access import NetworkAccess
from agentvisor.net.guard import Guard
from agentvisor.net.proxy import INSIDE_CA, EgressProxy
from agentvisor.net.secrets import Secret, SecretStore
ALLOWED = sys.argv[1]
class AllowOne:
    def decide(self, action, context):
        ok = ALLOWED in action.target
        if action.kind == "secret":
            ok = True
        return Decision("allow" if ok else "deny", "benchmark rule", rule="bench")
    def allows_exact_host(self, host, port, context):
        ok = f"{host}:{port}" == ALLOWED
        return Decision("allow", "benchmark rule", rule="bench") if ok else None
secrets, ca_file = None, None
if len(sys.argv) > 2:  # intercept toward ALLOWED, injecting a key, trusting this CA
    os.environ["BENCH_KEY"] = "sk-bench-0123456789abcdef"
    secrets = SecretStore([Secret("KEY", (ALLOWED,), env="BENCH_KEY")])
    ca_file = sys.argv[2]
proxy = EgressProxy(
    NetworkAccess(AllowOne(), Guard()), secrets=secrets, ca_file=ca_file
).start()
run_ca = ""
if secrets is not None:
    fd, run_ca = tempfile.mkstemp(suffix=".pem")
    os.write(fd, proxy.attachment().ro_data[INSIDE_CA])
    os.close(fd)
print(proxy.socket_path, run_ca, flush=True)
time.sleep(3600)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"nothing listens on {port}")


def download(conn: http.client.HTTPConnection, url: str) -> tuple[int, float]:
    buffer = bytearray(CHUNK)
    start = time.perf_counter()
    conn.request("GET", url)
    response = conn.getresponse()
    total = 0
    while True:
        n = response.readinto(buffer)
        if not n:
            break
        total += n
    return total, time.perf_counter() - start


def tunnel(proxy_port: int, server_port: int) -> http.client.HTTPConnection:
    conn = http.client.HTTPConnection("127.0.0.1", proxy_port, timeout=60)
    conn.set_tunnel("127.0.0.1", server_port)
    return conn


def small(conn: http.client.HTTPConnection, url: str, count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        conn.request("GET", url)
        response = conn.getresponse()
        response.read()
        times.append(time.perf_counter() - start)
    return times


def small_fresh(make: callable, url: str, count: int) -> list[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        conn = make()
        conn.request("GET", url)
        conn.getresponse().read()
        conn.close()
        times.append(time.perf_counter() - start)
    return times


def start_proxy(
    procs: list[subprocess.Popen], env: dict[str, str], allowed: str, *extra: str
) -> tuple[int, str]:
    """A proxy process and a relay in front of it: the relay's port, and the run CA's
    certificate file when the proxy intercepts."""
    proxy = subprocess.Popen(
        [sys.executable, "-c", PROXY, allowed, *extra], stdout=subprocess.PIPE, text=True, env=env
    )
    procs.append(proxy)
    sock_path, _, run_ca = proxy.stdout.readline().strip().partition(" ")
    rport = free_port()
    relay = subprocess.Popen(
        [
            sys.executable,
            "-I",
            "-S",
            str(SRC / "agentvisor/net/relay.py"),
            "--listen",
            f"127.0.0.1:{rport}",
            "--socket",
            sock_path,
            "--",
            "sleep",
            "3600",
        ]
    )
    procs.append(relay)
    wait_port(rport)
    return rport, run_ca


def tls_paths(procs: list[subprocess.Popen], env: dict[str, str], mb: int, count: int) -> None:
    """https direct, through a CONNECT tunnel, and terminated by the proxy (issue 18)."""
    import ssl
    import tempfile

    import trustme

    ca = trustme.CA()
    workdir = tempfile.mkdtemp()
    chain = os.path.join(workdir, "server.pem")
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(chain)
    ca_file = os.path.join(workdir, "ca.pem")
    ca.cert_pem.write_to_path(ca_file)
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER, str(mb), chain], stdout=subprocess.PIPE, text=True
    )
    procs.append(server)
    tport = int(server.stdout.readline())
    allowed = f"127.0.0.1:{tport}"
    tunnel_port, _ = start_proxy(procs, env, allowed)
    intercept_port, run_ca = start_proxy(procs, env, allowed, ca_file)
    server_ctx = ssl.create_default_context(cafile=ca_file)
    run_ctx = ssl.create_default_context(cafile=run_ca)

    def https(port: int | None, context: ssl.SSLContext) -> http.client.HTTPSConnection:
        if port is None:
            return http.client.HTTPSConnection("127.0.0.1", tport, timeout=60, context=context)
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=60, context=context)
        conn.set_tunnel("127.0.0.1", tport)
        return conn

    paths = (
        ("direct", lambda: https(None, server_ctx)),
        ("CONNECT tunnel", lambda: https(tunnel_port, server_ctx)),
        ("TLS terminated + key", lambda: https(intercept_port, run_ctx)),
    )
    print(f"\nhttps: {mb} MB download (best of 3) and {count} small GETs on one connection")
    base_rate = base_p50 = 0.0
    for label, make in paths:
        rates = []
        for _ in range(3):
            conn = make()
            size, seconds = download(conn, "/big")
            conn.close()
            rates.append(size / seconds / 1e6)
        conn = make()
        small(conn, "/small", 20)
        p50 = pct(small(conn, "/small", count), 50)
        conn.close()
        base_rate, base_p50 = (max(rates), p50) if label == "direct" else (base_rate, base_p50)
        print(
            f"  {label:22} {max(rates):8.1f} MB/s {max(rates) / base_rate:6.1%} of direct   "
            f"p50 {p50 * 1e3:6.3f} ms (added {(p50 - base_p50) * 1e3:6.3f} ms)"
        )


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3, help="downloads per path (best counts)")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    procs = []
    try:
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(args.mb)], stdout=subprocess.PIPE, text=True
        )
        procs.append(server)
        sport = int(server.stdout.readline())
        rport, _ = start_proxy(procs, env, f"127.0.0.1:{sport}")
        origin = f"http://127.0.0.1:{sport}"

        def direct() -> http.client.HTTPConnection:
            return http.client.HTTPConnection("127.0.0.1", sport, timeout=60)

        def via_proxy() -> http.client.HTTPConnection:
            return http.client.HTTPConnection("127.0.0.1", rport, timeout=60)

        print(f"loopback, {os.cpu_count()} cores; server, proxy and relay in their own processes\n")
        rows = []
        for label, make, url in (
            ("direct", direct, "/big"),
            ("proxy: http forward", via_proxy, origin + "/big"),
            ("proxy: CONNECT tunnel", lambda: tunnel(rport, sport), "/big"),
        ):
            rates = []
            for _ in range(args.rounds):  # best of rounds: loopback on a shared box is noisy
                conn = make()
                size, seconds = download(conn, url)
                conn.close()
                rates.append(size / seconds / 1e6)
            rows.append((label, max(rates)))
        base = rows[0][1]
        print(f"download of {args.mb} MB (best of {args.rounds})")
        for label, rate in rows:
            print(f"  {label:24} {rate:8.1f} MB/s   {rate / base:6.1%} of direct")

        print(f"\n{args.requests} small GETs, one keep-alive connection")
        d_conn, p_conn = direct(), via_proxy()
        small(d_conn, "/small", 20)
        small(p_conn, origin + "/small", 20)
        d = small(d_conn, "/small", args.requests)
        p = small(p_conn, origin + "/small", args.requests)
        print(
            f"  direct                   p50 {pct(d, 50) * 1e3:6.3f} ms  p90 "
            f"{pct(d, 90) * 1e3:6.3f} ms"
        )
        print(
            f"  proxy: http forward      p50 {pct(p, 50) * 1e3:6.3f} ms  p90 "
            f"{pct(p, 90) * 1e3:6.3f} ms"
        )
        print(
            f"  added per request        p50 {(pct(p, 50) - pct(d, 50)) * 1e3:6.3f} ms  "
            f"p90 {(pct(p, 90) - pct(d, 90)) * 1e3:6.3f} ms"
        )

        fresh = max(100, args.requests // 5)
        print(f"\n{fresh} small GETs, a new connection each (the tunnel's case)")
        d = small_fresh(direct, "/small", fresh)
        t = small_fresh(lambda: tunnel(rport, sport), "/small", fresh)
        print(f"  direct                   p50 {pct(d, 50) * 1e3:6.3f} ms")
        print(
            f"  proxy: CONNECT tunnel    p50 {pct(t, 50) * 1e3:6.3f} ms  (added "
            f"{(pct(t, 50) - pct(d, 50)) * 1e3:.3f} ms)"
        )
        tls_paths(procs, env, args.mb, args.requests)
    finally:
        for proc in reversed(procs):
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
