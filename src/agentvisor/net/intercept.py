"""TLS terminated by the egress proxy for the hosts a secret may reach.

A harness in the sandbox holds placeholders, never keys (``OPENAI_API_KEY`` set to
``{{secret:OPENAI_API_KEY}}``). When it opens ``CONNECT api.openai.com:443`` and a
configured secret may go to that host, the proxy answers the TLS handshake itself with
a certificate from `RunCA`, a certificate authority made for this run whose key never
leaves the host process (the sandbox gets only its certificate, through
``SSL_CERT_FILE`` and friends). `Interceptor` then reads each HTTP/1.1 request, admits
it by the policy (an audit event each), puts the secret's value in for its placeholder
in the request headers, and only toward that secret's hosts; it sends the request on a
TLS connection that verifies the real server as any client would, and redacts the
value from the response as it streams back. CONNECT to every other allowed host stays a
plain tunnel that agentvisor never decrypts.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import socket
import ssl
import tempfile
import threading
from typing import Any

from ..errors import ConfigError, NetworkBlocked, PolicyDenied
from .access import Admission, NetworkAccess
from .guard import Target
from .http1 import (
    FRAMING,
    BadHead,
    end_to_end,
    next_event,
    next_request,
    request_framing,
    send_error,
)
from .proxy import SYSTEM_BUNDLES
from .secrets import SecretStore, host_matches, names_in

_VALIDITY = datetime.timedelta(days=7)
# The largest request body held whole to fill placeholders in (`SecretConfig.proxy_body`).
MAX_FILLED_BODY = 16 * 1024 * 1024


class _TooLarge(Exception):
    """A request body too large to hold whole for filling in placeholders."""


class RunCA:
    """A certificate authority for one run: it signs a leaf certificate per intercepted
    host; its private key exists only in this process's memory."""

    def __init__(self) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._key = ec.generate_private_key(ec.SECP256R1())
        self._leaf_key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = x509.Name(
            [x509.NameAttribute(NameOID.COMMON_NAME, f"agentvisor run CA {os.getpid()}")]
        )
        self._name = name
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM)
        self._leaf_key_pem = self._leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        # ssl loads a certificate chain only from files: a private directory holds the
        # leaf certificates and their key (never the CA's key) until `close`.
        self._dir = tempfile.mkdtemp(prefix="agentvisor-ca-")
        os.chmod(self._dir, 0o700)
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._lock = threading.Lock()

    def trust_bundle(self) -> bytes:
        """The system's roots plus this CA: what ``SSL_CERT_FILE`` points at inside."""
        for path in SYSTEM_BUNDLES:
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    return f.read().rstrip(b"\n") + b"\n" + self.cert_pem
        import certifi

        with open(certifi.where(), "rb") as f:
            return f.read().rstrip(b"\n") + b"\n" + self.cert_pem

    def server_context(self, host: str) -> ssl.SSLContext:
        """A TLS server context presenting a certificate for ``host`` signed by this CA."""
        with self._lock:
            context = self._contexts.get(host)
            if context is None:
                context = self._contexts[host] = self._issue(host)
            return context

    def _issue(self, host: str) -> ssl.SSLContext:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        try:
            alt: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host))
        except ValueError:
            alt = x509.DNSName(host)
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host[:64])]))
            .issuer_name(self._name)
            .public_key(self._leaf_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.SubjectAlternativeName([alt]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        path = os.path.join(self._dir, f"leaf-{len(self._contexts)}.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(cert.public_bytes(serialization.Encoding.PEM) + self.cert_pem)
            f.write(self._leaf_key_pem)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["http/1.1"])  # this side speaks HTTP/1.1 only
        context.load_cert_chain(path)
        return context

    def close(self) -> None:
        shutil.rmtree(self._dir, ignore_errors=True)


class Interceptor:
    """Serves the requests of one intercepted CONNECT (see the module docstring)."""

    def __init__(
        self,
        access: NetworkAccess,
        secrets: SecretStore,
        ca: RunCA,
        upstream_context: ssl.SSLContext,
        *,
        timeout: float,
        session: str | None,
    ) -> None:
        self.access = access
        self.secrets = secrets
        self.ca = ca
        self.upstream_context = upstream_context
        self.timeout = timeout
        self.session = session

    def wants(self, target: Target) -> bool:
        """Whether a secret may go to this host: only then is its TLS terminated."""
        return any(
            host_matches(self.secrets.get(name).hosts, target.host, target.port)
            for name in self.secrets.names
        )

    def serve(self, client: socket.socket, admission: Admission) -> None:
        import h11

        target = admission.target
        try:
            tls = self.ca.server_context(target.host).wrap_socket(client, server_side=True)
        except (ssl.SSLError, OSError):
            return  # the client did not trust the run CA, or went away
        upstream: ssl.SSLSocket | None = None
        up = h11.Connection(h11.CLIENT)
        pending = b""
        try:
            while True:
                conn, request, pending = next_request(tls, pending)
                if request is None:
                    return
                if upstream is None:  # first request, or the server closed the last one
                    try:
                        upstream, up = self._dial(admission), h11.Connection(h11.CLIENT)
                    except (ssl.SSLError, OSError) as exc:
                        reason = f"{target.hostport}: {exc}"
                        send_error(conn, tls, 502, reason, "proxy:upstream-tls")
                        return
                if not self._exchange(conn, tls, up, upstream, request, target):
                    return
                if conn.our_state is not h11.DONE:
                    return
                if up.our_state is h11.DONE and up.their_state is h11.DONE:
                    up.start_next_cycle()
                else:
                    upstream.close()
                    upstream = None
                pending = conn.trailing_data[0]
        except BadHead as exc:
            send_error(h11.Connection(h11.SERVER), tls, 400, str(exc), "proxy:framing")
        except (h11.RemoteProtocolError, h11.LocalProtocolError, OSError):
            pass
        finally:
            if upstream is not None:
                upstream.close()
            tls.close()

    def _dial(self, admission: Admission) -> ssl.SSLSocket:
        raw = self.access.guard.connect(admission.resolved, self.timeout)
        try:
            raw.settimeout(self.timeout)
            return self.upstream_context.wrap_socket(raw, server_hostname=admission.target.host)
        except BaseException:
            raw.close()
            raise

    def _exchange(
        self,
        conn: Any,
        tls: ssl.SSLSocket,
        up: Any,
        upstream: ssl.SSLSocket,
        request: Any,
        target: Target,
    ) -> bool:
        """One request and its response; False when the connection must end."""
        import h11

        path = request.target.decode("ascii", "replace")
        method = request.method.decode("ascii", "replace").upper()
        if not path.startswith("/"):
            send_error(conn, tls, 400, "inside a tunnel, requests name a path", "proxy:request")
            return False
        hop = Target(scheme="https", host=target.host, port=target.port, path=path, ip=target.ip)
        body: bytes | None = None
        try:
            self.access.admit(hop, method=method, tool="proxy", session=self.session, resolve=False)
            headers = self._headers(request.headers, target)
            fills_body = self._body_secrets(target)
            if fills_body:
                if conn.they_are_waiting_for_100_continue:
                    tls.sendall(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
                body = self._filled_body(conn, tls, target, fills_body)
                headers = [(n, v) for n, v in headers if n not in FRAMING]
                headers.append((b"content-length", str(len(body)).encode()))
        except _TooLarge as exc:
            send_error(conn, tls, 413, str(exc), "proxy:body")
            return False
        except (NetworkBlocked, PolicyDenied) as exc:
            rule = getattr(exc, "rule", None) or getattr(getattr(exc, "decision", None), "rule", "")
            send_error(conn, tls, 403, str(exc), rule or "policy")
            return False
        except ConfigError as exc:  # a secret's value cannot be read on the host
            send_error(conn, tls, 502, f"{exc}; nothing was sent", "proxy:secret")
            return False
        if body is None and conn.they_are_waiting_for_100_continue:
            tls.sendall(conn.send(h11.InformationalResponse(status_code=100, headers=[])))
        upstream.sendall(up.send(h11.Request(method=request.method, target=path, headers=headers)))
        if body is not None:
            upstream.sendall(up.send(h11.Data(data=body)) + up.send(h11.EndOfMessage()))
        elif not self._stream_body(conn, tls, up, upstream):
            return False
        status, size = self._respond(conn, tls, up, upstream)
        self.access.record(
            {
                "kind": "response",
                "tool": "proxy",
                "session": self.session,
                "method": method,
                "destination": hop.url,
                "status": status,
                "bytes": size,
            }
        )
        return status is not None

    @staticmethod
    def _stream_body(conn: Any, tls: ssl.SSLSocket, up: Any, upstream: ssl.SSLSocket) -> bool:
        import h11

        while True:
            event = next_event(conn, tls)
            if isinstance(event, h11.Data):
                upstream.sendall(up.send(event))
            elif isinstance(event, h11.EndOfMessage):
                upstream.sendall(up.send(h11.EndOfMessage()))
                return True
            else:
                return False

    def _body_secrets(self, target: Target) -> set[str]:
        """Secrets configured to be filled in request bodies (``proxy_body``) toward here."""
        return {
            name
            for name in self.secrets.names
            if self.secrets.get(name).proxy_body
            and host_matches(self.secrets.get(name).hosts, target.host, target.port)
        }

    def _filled_body(self, conn: Any, tls: ssl.SSLSocket, target: Target, names: set[str]) -> bytes:
        """The whole request body with the placeholders of ``names`` filled in (which
        changes its length, so it is read before anything is sent, up to a limit)."""
        import h11

        chunks, size = [], 0
        while True:
            event = next_event(conn, tls)
            if isinstance(event, h11.EndOfMessage):
                break
            if not isinstance(event, h11.Data):
                raise OSError("the client ended mid-body")
            size += len(event.data)
            if size > MAX_FILLED_BODY:
                raise _TooLarge(
                    f"a request body whose placeholders are filled in is held whole, up to "
                    f"{MAX_FILLED_BODY} bytes; this one is larger"
                )
            chunks.append(bytes(event.data))
        text = b"".join(chunks).decode("utf-8", "surrogateescape")
        used = names_in(text) & names
        if not used:
            return b"".join(chunks)
        self._approve(used, target)
        filled = self.secrets.substitute(text, target.host, target.port, only=used)
        return filled.encode("utf-8", "surrogateescape")

    def _approve(self, used: set[str], target: Target) -> None:
        """The policy's word on each secret about to be sent; refused: nothing is sent."""
        for secret in sorted(used):
            decision = self.access.secret_use(
                secret, target.host, tool="proxy", session=self.session
            )
            if not decision.allowed:
                raise PolicyDenied(
                    f"refused: using secret {{{{secret:{secret}}}}} toward {target.host}: "
                    f"{decision.reason}; nothing was sent",
                    decision,
                )

    def _headers(self, headers: Any, target: Target) -> list[tuple[bytes, bytes]]:
        """The request's end-to-end headers with placeholders filled in for this host
        (refused, naming the secret, when one may not go there or the policy says no)."""
        used: set[str] = set()
        out = [(b"host", target.authority.encode("ascii"))]
        for name, value in end_to_end(headers):
            if name.lower() in FRAMING:
                continue
            text = value.decode("latin-1")
            names = names_in(text)
            if names:
                used |= names
                text = self.secrets.substitute(text, target.host, target.port)
            out.append((name, text.encode("latin-1")))
        self._approve(used, target)
        return out + request_framing(headers)

    def _respond(
        self, conn: Any, tls: ssl.SSLSocket, up: Any, upstream: ssl.SSLSocket
    ) -> tuple[int | None, int]:
        """Relay the response as it arrives, with every secret value redacted (which can
        change its length, so the proxy frames the body itself). Returns the status (None
        when the exchange broke off) and the body bytes relayed."""
        import h11

        redactor = self.secrets.redactor()
        stream = redactor.stream()
        status, size = None, 0
        while True:
            event = next_event(up, upstream)
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                status = event.status_code
                headers = [
                    (name, redactor.text(value.decode("latin-1")).encode("latin-1"))
                    for name, value in end_to_end(event.headers)
                    if name.lower() not in (b"content-length", b"transfer-encoding")
                ]
                tls.sendall(
                    conn.send(
                        h11.Response(
                            status_code=event.status_code, reason=event.reason, headers=headers
                        )
                    )
                )
            elif isinstance(event, h11.Data):
                size += len(event.data)
                data = stream.feed(bytes(event.data))
                if data:
                    tls.sendall(conn.send(h11.Data(data=data)))
            elif isinstance(event, h11.EndOfMessage):
                rest = stream.flush()
                if rest:
                    tls.sendall(conn.send(h11.Data(data=rest)))
                tls.sendall(conn.send(h11.EndOfMessage()))
                return status, size
            else:
                return None, size
