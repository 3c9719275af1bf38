"""The egress proxy: a sandbox's only way out under ``sandbox.network: proxy``.

`EgressProxy` serves HTTP proxy requests on a Unix socket in a private (0700)
directory on the host: ``CONNECT host:port`` for https (a tunnel to the host that was
admitted, nothing else) and absolute-URI requests for plain http (forwarded with the
``Host`` header rewritten to the admitted host). Every request goes through
`NetworkAccess.admit` with ``tool="proxy"``, so the destination guard and the policy
apply, and the policy's default for the proxy is deny. A refusal is a ``403`` with
``X-Agentvisor-Reason`` and ``X-Agentvisor-Rule`` headers.

`EgressProxy.attachment` tells the sandbox how to reach it: the socket is bound in,
`relay` (run by the sandbox's own ``/usr/bin/python3``) presents it on 127.0.0.1
inside the sandbox's loopback-only network namespace, and the proxy variables point
there. Programs that ignore them have no route out at all.

Stdlib plus h11 (imported when the proxy starts), so ``agentvisor exec`` stays fast.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NetworkBlocked, PolicyDenied
from ..sandbox.base import Attachment
from . import unixsock
from .access import Admission, NetworkAccess, caller_gone
from .guard import parse_url
from .http1 import (
    FRAMING,
    BadHead,
    end_to_end,
    next_event,
    next_request,
    request_framing,
    send_error,
)
from .relay import copy, pump

if TYPE_CHECKING:
    from .intercept import Interceptor
    from .secrets import SecretStore

log = logging.getLogger("agentvisor.net.proxy")

INSIDE_DIR = "/run/agentvisor"
INSIDE_SOCKET = f"{INSIDE_DIR}/proxy.sock"
INSIDE_RELAY = f"{INSIDE_DIR}/relay.py"
INSIDE_CA = f"{INSIDE_DIR}/run-ca.pem"
INSIDE_BUNDLE = f"{INSIDE_DIR}/ca-bundle.pem"
# The usual paths of the system's CA bundle (Debian and Fedora families).
SYSTEM_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt")
# Where OpenSSL, Python requests, curl and git look for a CA bundle.
BUNDLE_VARIABLES = ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "GIT_SSL_CAINFO")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")
# Loopback inside the sandbox is the sandbox's own; keep it off the proxy.
NO_PROXY = "localhost,127.0.0.1,::1"
_IDLE_TIMEOUT = 120.0
# Bodies at least this large skip h11 and are spliced (the connection then closes).
_RAW_BODY_MIN = 1024 * 1024


def relay_source() -> bytes:
    return (Path(__file__).with_name("relay.py")).read_bytes()


class EgressProxy:
    """An HTTP proxy on a private Unix socket that admits each destination by policy."""

    def __init__(
        self,
        access: NetworkAccess,
        *,
        port: int = 3128,
        timeout: float = 30.0,
        session: str | None = None,
        python: str = "/usr/bin/python3",
        secrets: SecretStore | None = None,
        ca_file: str | None = None,
    ) -> None:
        """With ``secrets``, CONNECTs to a host a secret may reach are terminated with a
        per-run CA and their placeholders filled in (`intercept`); ``ca_file`` is then
        trusted, besides the usual roots, to verify those upstreams."""
        self.access = access
        self.port = port
        self.timeout = timeout
        self.session = session
        self.python = python
        self._secrets = secrets
        self._ca_file = ca_file
        self._interceptor: Interceptor | None = None
        self._dir: str | None = None
        self._server: socket.socket | None = None
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()

    @classmethod
    def from_config(
        cls,
        config: Any,
        *,
        session: str | None = None,
        access: NetworkAccess | None = None,
        inject_secrets: bool = False,
    ) -> EgressProxy:
        """``inject_secrets`` (``agentvisor run``): the configured secrets are filled in
        toward their hosts by TLS interception; otherwise the proxy never sees a value."""
        secrets = None
        if inject_secrets:
            from .secrets import SecretStore

            secrets = SecretStore.from_config(config)
        return cls(
            access or NetworkAccess.from_config(config),
            port=config.network.proxy_port,
            timeout=config.network.timeout,
            session=session,
            secrets=secrets,
            ca_file=config.network.ca_file,
        )

    @property
    def socket_path(self) -> str:
        if self._dir is None:
            raise RuntimeError("the egress proxy is not started")
        return os.path.join(self._dir, "proxy.sock")

    def start(self) -> EgressProxy:
        import h11  # noqa: F401 - fail here, not in the first connection's thread

        self._dir = tempfile.mkdtemp(prefix="agentvisor-proxy-")
        os.chmod(self._dir, 0o700)
        if self._secrets is not None and self._secrets.names:
            from .client import verifying_context
            from .intercept import Interceptor, RunCA

            self._interceptor = Interceptor(
                self.access,
                self._secrets,
                RunCA(),
                verifying_context(self._ca_file),
                timeout=self.timeout,
                session=self.session,
            )
        self._server = unixsock.listen(self.socket_path, socket.SOCK_STREAM, 1024)
        threading.Thread(target=self._accept, name="agentvisor-proxy", daemon=True).start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            unixsock.close(server)
        with self._lock:
            for sock in list(self._open):
                _close(sock)
            self._open.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        if self._interceptor is not None:
            self._interceptor.ca.close()
            self._interceptor = None

    def __enter__(self) -> EgressProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def attachment(self) -> Attachment:
        """What the sandbox needs: the socket bound in, the relay, and the proxy variables."""
        url = f"http://127.0.0.1:{self.port}"
        env = {name: url for name in PROXY_VARIABLES}
        env |= {name.lower(): url for name in PROXY_VARIABLES}
        env |= {"NO_PROXY": NO_PROXY, "no_proxy": NO_PROXY}
        python, ro_binds = self._interpreter()
        ro_data = {INSIDE_RELAY: relay_source()}
        if self._interceptor is not None:
            # The run CA's certificate (never its key), trusted by the usual means.
            ca = self._interceptor.ca
            bundle = ca.trust_bundle()
            ro_data |= {INSIDE_CA: ca.cert_pem, INSIDE_BUNDLE: bundle}
            # Also over the system bundle, for programs that read only the usual path.
            ro_data |= {path: bundle for path in SYSTEM_BUNDLES if os.path.isfile(path)}
            env |= {name: INSIDE_BUNDLE for name in BUNDLE_VARIABLES}
            env["NODE_EXTRA_CA_CERTS"] = INSIDE_CA
        return Attachment(
            binds={self.socket_path: INSIDE_SOCKET},
            ro_data=ro_data,
            ro_binds=ro_binds,
            env=env,
            argv_prefix=[
                python,
                "-I",
                "-S",
                INSIDE_RELAY,
                "--listen",
                f"127.0.0.1:{self.port}",
                "--socket",
                INSIDE_SOCKET,
                "--",
            ],
        )

    def _interpreter(self) -> tuple[str, dict[str, str]]:
        """The system python3 (the sandbox mounts /usr), else this Python's own
        installation, bound read-only at the same path."""
        if os.access(self.python, os.X_OK):
            return self.python, {}
        base = sys.base_prefix
        return os.path.join(base, "bin", f"python{sys.version_info[0]}"), {base: base}

    # -- serving --------------------------------------------------------------------------

    def _accept(self) -> None:
        while self._server is not None:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _track(self, sock: socket.socket) -> socket.socket:
        with self._lock:
            self._open.add(sock)
        return sock

    def _forget(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._open.discard(sock)
        _close(sock)

    def _serve(self, client: socket.socket) -> None:
        import h11

        self._track(client)
        upstream: _Upstream | None = None
        pending = b""
        try:
            # Inside the try: `stop` may already have closed this socket.
            client.settimeout(_IDLE_TIMEOUT)
            while True:
                conn, event, pending = next_request(client, pending)
                if event is None:
                    return
                if event.method.upper() == b"CONNECT":
                    self._tunnel(conn, client, event)
                    return
                upstream = self._forward(conn, client, event, upstream)
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                pending = conn.trailing_data[0]
        except BadHead as exc:
            send_error(
                h11.Connection(h11.SERVER), client, 400, f"bad request: {exc}", "proxy:framing"
            )
        except (h11.RemoteProtocolError, h11.LocalProtocolError) as exc:
            if conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
                send_error(conn, client, 400, f"bad request: {exc}", "proxy:protocol")
        except OSError:
            pass
        finally:
            if upstream is not None:
                self._forget(upstream.sock)
            self._forget(client)

    def _admit(
        self, conn: Any, client: socket.socket, admit: Callable[[], Admission], what: str
    ) -> Admission | None:
        # An ask for this destination is withdrawn if the client disconnects meanwhile.
        waiting = caller_gone.set(lambda: unixsock.hung_up(client))
        try:
            return admit()
        except (NetworkBlocked, PolicyDenied) as exc:
            rule = (
                getattr(exc, "rule", "")
                or getattr(getattr(exc, "decision", None), "rule", "")
                or "policy"
            )
            log.info("proxy refused %s: %s", what, exc)
            send_error(conn, client, 403, str(exc), rule)
            return None
        finally:
            caller_gone.reset(waiting)

    def _dial(self, conn: Any, client: socket.socket, admission: Admission) -> socket.socket | None:
        try:
            return self._track(self.access.guard.connect(admission.resolved, self.timeout))
        except (ConnectionError, OSError) as exc:
            send_error(conn, client, 502, str(exc), "proxy:connect")
            return None

    def _tunnel(self, conn: Any, client: socket.socket, request: Any) -> None:
        import h11

        target = request.target.decode("ascii", "replace")
        if not isinstance(next_event(conn, client), h11.EndOfMessage):
            return
        admission = self._admit(
            conn,
            client,
            lambda: self.access.admit_connect(target, tool="proxy", session=self.session),
            f"CONNECT {target}",
        )
        if admission is None:
            return
        established = h11.Response(status_code=200, headers=[], reason=b"Connection established")
        if self._interceptor is not None and self._interceptor.wants(admission.target):
            if conn.trailing_data[0]:  # the TLS handshake must start after the 200
                send_error(
                    conn, client, 400, "data sent before the tunnel was open", "proxy:request"
                )
                return
            client.sendall(conn.send(established))
            client.settimeout(_IDLE_TIMEOUT)
            self._interceptor.serve(client, admission)
            return
        upstream = self._dial(conn, client, admission)
        if upstream is None:
            return
        try:
            client.sendall(conn.send(established))
            early, _ = conn.trailing_data
            if early:
                upstream.sendall(early)
            client.settimeout(None)
            upstream.settimeout(None)
            back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
            back.start()
            pump(client, upstream)
            back.join()
        finally:
            self._forget(upstream)

    def _forward(
        self, conn: Any, client: socket.socket, request: Any, upstream: _Upstream | None
    ) -> _Upstream | None:
        import h11

        url = request.target.decode("ascii", "replace")
        method = request.method.decode("ascii", "replace").upper()
        if not url.lower().startswith("http://"):
            why = (
                "https goes through CONNECT; set HTTPS_PROXY"
                if url.lower().startswith("https://")
                else "not a proxy request (absolute http URL)"
            )
            send_error(conn, client, 400, f"refused {url[:200]}: {why}", "proxy:request")
            return upstream

        def admit() -> Admission:
            target = parse_url(url)
            reuse = upstream is not None and upstream.key == (target.host, target.port)
            return self.access.admit(
                target, method=method, tool="proxy", session=self.session, resolve=not reuse
            )

        admission = self._admit(conn, client, admit, f"{method} {url[:200]}")
        if admission is None:
            return upstream
        target = admission.target
        if upstream is None or upstream.key != (target.host, target.port):
            if upstream is not None:
                self._forget(upstream.sock)
            sock = self._dial(conn, client, admission)
            if sock is None:
                return None
            sock.settimeout(self.timeout)
            upstream = _Upstream((target.host, target.port), sock, h11.Connection(h11.CLIENT))
        if conn.they_are_waiting_for_100_continue:  # admitted: let the client send its body
            client.sendall(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
        headers = [
            (b"host", target.authority.encode("ascii")),
            *[(n, v) for n, v in end_to_end(request.headers) if n.lower() not in FRAMING],
            *request_framing(request.headers),
        ]
        up = upstream.conn
        upstream.sock.sendall(
            up.send(
                h11.Request(
                    method=request.method,
                    target=target.path.encode("ascii", "replace"),
                    headers=headers,
                )
            )
        )
        # The request body, then the response, each streamed as it arrives.
        while True:
            event = next_event(conn, client)
            if isinstance(event, h11.Data):
                upstream.sock.sendall(up.send(event))
            elif isinstance(event, h11.EndOfMessage):
                upstream.sock.sendall(up.send(h11.EndOfMessage()))
                break
            else:
                raise OSError("client closed mid-request")
        while True:
            event = next_event(up, upstream.sock)
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                headers = end_to_end(event.headers)
                if any(n.lower() == b"transfer-encoding" for n, _ in headers):
                    # h11 framed the body by its chunks; a length beside them would lie.
                    headers = [(n, v) for n, v in headers if n.lower() != b"content-length"]
                length = _raw_body_length(method, event)
                if length is not None:
                    headers.append((b"connection", b"close"))
                client.sendall(
                    conn.send(
                        h11.Response(
                            status_code=event.status_code, reason=event.reason, headers=headers
                        )
                    )
                )
                if length is not None:
                    self._raw_body(conn, client, upstream, length)
                    return None
            elif isinstance(event, h11.Data):
                client.sendall(conn.send(event))
            elif isinstance(event, h11.EndOfMessage):
                client.sendall(conn.send(h11.EndOfMessage()))
                break
            else:
                raise OSError("upstream closed mid-response")
        if up.our_state is h11.DONE and up.their_state is h11.DONE:
            up.start_next_cycle()
            return upstream
        self._forget(upstream.sock)
        return None

    def _raw_body(self, conn: Any, client: socket.socket, upstream: _Upstream, length: int) -> None:
        """Send a large fixed-length body by splice, past h11; both connections close after."""
        import h11

        sent = 0
        while True:  # what h11 has buffered already
            event = upstream.conn.next_event()
            if not isinstance(event, h11.Data):
                break
            client.sendall(conn.send(event))
            sent += len(event.data)
        upstream.sock.settimeout(None)
        client.settimeout(None)
        if sent < length:
            copy(upstream.sock, client, length - sent)
        self._forget(upstream.sock)


def _raw_body_length(method: str, response: Any) -> int | None:
    """The length of a response body worth moving past h11 (large, Content-Length framed)."""
    if method == "HEAD" or response.status_code in (204, 304) or response.status_code < 200:
        return None
    lengths = [v for n, v in response.headers if n == b"content-length"]
    if any(n == b"transfer-encoding" for n, _ in response.headers) or len(lengths) != 1:
        return None
    length = int(lengths[0])
    return length if length >= _RAW_BODY_MIN else None


class _Upstream:
    def __init__(self, key: tuple[str, int], sock: socket.socket, conn: Any) -> None:
        self.key = key
        self.sock = sock
        self.conn = conn


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
