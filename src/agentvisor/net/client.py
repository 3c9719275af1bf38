"""The guarded HTTP client behind ``web_extract``, ``http_request``, ``web_search`` and
``agentvisor fetch``.

httpx does the HTTP; the guard decides where it goes. `PinnedBackend` is an httpcore
network backend that dials only addresses `NetworkAccess.admit` has checked for that
exact host and port, so TLS still verifies and sends SNI for the original name while
the TCP connection goes to the pinned address. Redirects are not left to httpx: each
hop is admitted again (at most ``network.max_redirects``), secrets are substituted per
hop for the host of that hop, and the response is capped in size and total time.
"""

from __future__ import annotations

import contextvars
import select
import socket
import ssl
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, cast

from ..errors import AgentvisorError, NetworkBlocked, PolicyDenied
from ..records import Declared, Default
from .access import Admission, NetworkAccess
from .guard import Guard, Resolved, parse_url
from .secrets import Redactor, SecretStore, names_in, placeholder, redact_logs

if TYPE_CHECKING:
    import httpcore
    import httpx

USER_AGENT = "agentvisor/0.1 (+host-side fetch)"
REDIRECTS = (301, 302, 303, 307, 308)
# Request headers the caller may not set: the client owns framing, routing and Host.
_DROPPED = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "upgrade",
        "trailer",
    }
)
# Dropped when a redirect leaves the origin, as browsers and httpx do.
_CREDENTIAL_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})

# The wall-clock deadline of the fetch running in this context; reads never wait past it.
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("deadline", default=None)


class FetchFailed(AgentvisorError):
    """A permitted request failed: connection refused, TLS error, timeout, bad response."""


class FetchResult(Declared):
    """What a guarded fetch returned, already redacted."""

    url: str
    status: int
    headers: dict[str, str]
    content: bytes
    content_type: str
    truncated: bool = False
    redirects: tuple[str, ...] = ()
    charset: str | None = None

    @property
    def mime(self) -> str:
        return self.content_type.split(";", 1)[0].strip().lower()

    def text(self) -> str:
        """The body decoded by its declared charset, or as UTF-8 when that charset cannot
        decode it (`charset_note` then says so); bad bytes are replaced."""
        return self._decoded()[0]

    @property
    def charset_note(self) -> str | None:
        """Why the body was not decoded by the charset the server declared, if it was not."""
        return self._decoded()[1]

    def _decoded(self) -> tuple[str, str | None]:
        if self.charset:
            try:
                return self.content.decode(self.charset, errors="replace"), None
            # Unknown (LookupError), or a codec Python has that is no charset of a page:
            # idna refuses error handlers, hex and base64 are not text, ...
            except (LookupError, UnicodeError, ValueError, TypeError):
                note = (
                    f"the response declares charset {self.charset[:40]!r}, which cannot "
                    "decode it; it was decoded as UTF-8 (undecodable bytes replaced)"
                )
                return self.content.decode("utf-8", errors="replace"), note
        return self.content.decode("utf-8", errors="replace"), None


class _Hop(Declared, frozen=False):
    """The request as it stands at one hop of a redirect chain."""

    method: str
    url: str  # with placeholders, never with values
    headers: list[tuple[str, str]]
    body: str | bytes | None
    redirects: list[str] = Default(factory=list)
    # Set once a redirect has left the agent's origin: from then on nothing is injected
    # and no placeholder is expanded (the server, not the agent, chose the destination).
    left_origin: bool = False
    # Set when the body is re-sent to another origin: only an allow rule may admit that.
    body_moved: bool = False


class Fetcher:
    """Makes guarded requests for one policy (and one secret store)."""

    def __init__(
        self,
        access: NetworkAccess,
        *,
        secrets: SecretStore | None = None,
        max_bytes: int = 10 * 1024 * 1024,
        timeout: float = 30.0,
        max_redirects: int = 5,
        ca_file: str | None = None,
        verify: ssl.SSLContext | None = None,
    ) -> None:
        self.access = access
        self.secrets = secrets or SecretStore()
        redact_logs(self.secrets)
        self.max_bytes = max_bytes
        self.timeout = timeout
        self.max_redirects = max_redirects
        self._ssl = verify or verifying_context(ca_file)
        self._backend: PinnedBackend | None = None
        self._client: httpx.Client | None = None

    @classmethod
    def from_config(
        cls, config: Any, access: NetworkAccess | None = None, **overrides: Any
    ) -> Fetcher:
        net = config.network
        options: dict[str, Any] = {
            "max_bytes": net.max_response_bytes,
            "timeout": net.timeout,
            "max_redirects": net.max_redirects,
            "ca_file": net.ca_file,
        }
        options.update(overrides)
        return cls(
            access or NetworkAccess.from_config(config),
            secrets=SecretStore.from_config(config),
            **options,
        )

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | Sequence[tuple[str, str]] | None = None,
        body: str | bytes | None = None,
        tool: str = "fetch",
        session: str | None = None,
        inject_headers: bool = False,
    ) -> FetchResult:
        """One guarded request, redirects followed and re-admitted hop by hop.

        ``inject_headers`` adds the ``header`` of secrets configured for the host (the
        ``http_request`` tool does; ``web_extract`` does not). Raises `NetworkBlocked`
        or `PolicyDenied` for refusals and `FetchFailed` for failures; every message and
        the result are redacted.
        """
        redactor = self.secrets.redactor()
        pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers or [])
        hop = _Hop(method.upper(), url, pairs, body)
        token = _deadline.set(time.monotonic() + self.timeout)
        try:
            while True:
                result = self._one_hop(hop, tool, session, inject_headers, redactor)
                if isinstance(result, FetchResult):
                    return result
        except (NetworkBlocked, PolicyDenied, FetchFailed) as exc:
            exc.args = tuple(
                redactor.text(a, fragments=True) if isinstance(a, str) else a for a in exc.args
            )
            raise
        finally:
            _deadline.reset(token)

    # -- one hop --------------------------------------------------------------------------

    def _one_hop(
        self, hop: _Hop, tool: str, session: str | None, inject: bool, redactor: Redactor
    ) -> FetchResult | None:
        if hop.body_moved:
            self._require_rule(hop, tool, session)
        admission = self.access.admit_url(hop.url, method=hop.method, tool=tool, session=session)
        request = self._build(hop, admission, tool, session, inject and not hop.left_origin)
        client = self._http()
        assert self._backend is not None
        self._backend.pin(admission.resolved)
        try:
            response = client.send(request, stream=True)
        except NetworkBlocked:
            raise
        except Exception as exc:
            raise FetchFailed(f"{hop.method} {admission.target.url}: {_describe(exc)}") from None
        try:
            location = response.headers.get("location")
            if response.status_code in REDIRECTS and location:
                self._redirect(hop, admission, response.status_code, location, redactor)
                return None
            return self._read(response, hop, redactor)
        finally:
            response.close()

    def _build(
        self, hop: _Hop, admission: Admission, tool: str, session: str | None, inject: bool
    ) -> httpx.Request:
        import httpx

        target = admission.target
        used: set[str] = set()
        subst = self._substituter(target.host, target.port, used)
        headers: list[tuple[str, str]] = []
        for name, value in hop.headers:
            if names_in(name):
                raise NetworkBlocked(
                    "refused: a secret placeholder cannot be a header name",
                    destination=target.hostport,
                )
            if name.strip().lower() in _DROPPED:
                continue
            sent = subst(value)
            if not (name + sent).isascii():
                # httpx would raise UnicodeEncodeError deep inside; say which header.
                raise FetchFailed(
                    f"header {name!r}: header names and values must be ASCII "
                    "(percent- or base64-encode other text)"
                )
            headers.append((name, sent))
        present = {name.lower() for name, _ in headers}
        if inject:
            for secret in self.secrets.auto_headers(target.host, target.port):
                name, template = secret.header_parts() or ("", "")
                if name.lower() not in present:
                    used.add(secret.name)
                    headers.append(
                        (name, template.replace("{value}", self.secrets.value(secret.name)))
                    )
        if not any(name.lower() == "user-agent" for name, _ in headers):
            headers.append(("User-Agent", USER_AGENT))
        path = subst(target.path)
        body = hop.body
        if isinstance(body, str):
            body = subst(body).encode("utf-8")
        elif isinstance(body, bytes) and b"{{" in body:
            body = subst(body.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
        for name in sorted(used):
            decision = self.access.secret_use(name, target.host, tool=tool, session=session)
            if not decision.allowed:
                raise PolicyDenied(
                    f"refused: using secret {placeholder(name)} toward "
                    f"{target.host}: {decision.reason}; nothing was sent",
                    decision,
                )
        url = httpx.URL(
            scheme=target.scheme,
            host=target.host,
            port=target.port,
            raw_path=path.encode("ascii", "strict") if path.isascii() else _quote_path(path),
        )
        return httpx.Request(
            hop.method, url, headers=headers, content=body, extensions={"timeout": self._timeouts()}
        )

    def _substituter(self, host: str, port: int, used: set[str]) -> Callable[[str], str]:
        def subst(text: str) -> str:
            names = names_in(text)
            if not names:
                return text
            used.update(names)
            return self.secrets.substitute(text, host, port)

        return subst

    def _redirect(
        self, hop: _Hop, admission: Admission, status: int, location: str, redactor: Redactor
    ) -> None:
        """Turn ``hop`` into the request a redirect asks for. The Location is the server's
        data, never a template: a placeholder in it (or a secret value, which redaction
        turns into one) stops the chain rather than being expanded."""
        import httpx

        old = admission.target
        if len(hop.redirects) >= self.max_redirects:
            raise NetworkBlocked(
                f"refused: more than {self.max_redirects} redirects "
                f"(last to {redactor.text(location)})",
                destination=old.hostport,
                rule="guard:redirects",
            )
        try:
            next_url = str(httpx.URL(hop.url).join(redactor.text(location)))
        except httpx.InvalidURL as exc:
            raise FetchFailed(f"invalid redirect location {location!r}: {exc}") from None
        if names_in(next_url):
            raise NetworkBlocked(
                f"refused: {old.url} redirects to {_shorten(next_url)}, which carries a secret "
                "(a placeholder, or a value the server echoed); placeholders are expanded only "
                "in the request the agent wrote, never in a server's Location",
                destination=old.hostport,
                rule="guard:redirect-secret",
            )
        new = parse_url(next_url)
        if (status == 303 and hop.method != "HEAD") or (
            status in (301, 302) and hop.method == "POST"
        ):
            hop.method, hop.body = "GET", None
            hop.headers = [(n, v) for n, v in hop.headers if n.lower() != "content-type"]
            hop.body_moved = False
        if (new.scheme, new.host, new.port) != (old.scheme, old.host, old.port):
            self._leave_origin(hop, old.url, next_url)
        hop.redirects.append(redactor.text(str(old.url)))
        hop.url = next_url

    def _leave_origin(self, hop: _Hop, old_url: str, next_url: str) -> None:
        """Drop every credential at an origin change; a body may follow only by rule."""
        hop.left_origin = True
        hop.headers = [
            (n, v)
            for n, v in hop.headers
            if n.lower() not in _CREDENTIAL_HEADERS and not names_in(v)
        ]
        if not hop.body:
            return
        body = hop.body if isinstance(hop.body, str) else hop.body.decode("utf-8", "replace")
        if names_in(body):
            raise NetworkBlocked(
                f"refused: {old_url} redirects the request body, which holds a secret "
                f"placeholder, to another origin ({_shorten(next_url)}); nothing was re-sent",
                destination=parse_url(next_url).hostport,
                rule="guard:redirect-body",
            )
        hop.body_moved = True

    def _require_rule(self, hop: _Hop, tool: str, session: str | None) -> None:
        """A 307/308 re-sends the agent's body to an origin a server chose: only a rule
        (or grant) that allows that method and destination lets it go, never a default
        and never a person asked about a request they did not see coming."""
        decision = self.access.preview(hop.url, method=hop.method, tool=tool, session=session)
        if decision.allowed and not (decision.rule or "").startswith("default:"):
            return
        raise NetworkBlocked(
            f"refused: a redirect would re-send the {hop.method} body to another origin, "
            f"{_shorten(hop.url)}; only a fetch rule allowing {hop.method} there lets it "
            f"(the policy says {decision.verdict}: {decision.reason})",
            destination=parse_url(hop.url).hostport,
            rule="guard:redirect-body",
        )

    def _read(self, response: httpx.Response, hop: _Hop, redactor: Redactor) -> FetchResult:
        chunks, size, truncated = [], 0, False
        try:
            for chunk in response.iter_bytes():
                if size + len(chunk) > self.max_bytes:
                    chunks.append(chunk[: self.max_bytes - size])
                    truncated = True
                    break
                chunks.append(chunk)
                size += len(chunk)
        except Exception as exc:
            raise FetchFailed(
                f"{hop.method} {redactor.text(str(response.url))}: {_describe(exc)}"
            ) from None
        content = redactor.bytes(b"".join(chunks))
        headers = {k.lower(): redactor.text(v) for k, v in response.headers.items()}
        return FetchResult(
            url=redactor.text(str(response.url)),
            status=response.status_code,
            headers=headers,
            content=content,
            content_type=headers.get("content-type", ""),
            truncated=truncated,
            redirects=tuple(hop.redirects),
            charset=response.charset_encoding,
        )

    def _timeouts(self) -> dict[str, float]:
        remaining = _remaining()
        limit = self.timeout if remaining is None else max(0.001, remaining)
        return {"connect": limit, "read": limit, "write": limit, "pool": limit}

    def _http(self) -> httpx.Client:
        if self._client is None:
            import httpx

            self._backend = PinnedBackend(self.access.guard)
            transport = _pinned_transport(self._backend, self._ssl)
            self._client = httpx.Client(
                transport=transport, follow_redirects=False, trust_env=False
            )
        return self._client


def _shorten(text: str, limit: int = 200) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _quote_path(path: str) -> bytes:
    from urllib.parse import quote

    return quote(path, safe="/?&=%:@!$'()*+,;~-._[]").encode("ascii")


def _remaining() -> float | None:
    deadline = _deadline.get()
    return None if deadline is None else deadline - time.monotonic()


def _describe(exc: BaseException) -> str:
    name = type(exc).__name__
    if "Timeout" in name or isinstance(exc, TimeoutError):
        return "timed out (network.timeout)"
    text = str(exc) or name
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, ssl.SSLError) and str(cause) not in text:
        text += f" ({cause})"
    return text


def verifying_context(ca_file: str | None) -> ssl.SSLContext:
    """Verifies servers against certifi's roots plus ``network.ca_file``, if set."""
    try:
        import certifi

        context = ssl.create_default_context(cafile=certifi.where())
    except ImportError:
        context = ssl.create_default_context()
    if ca_file:
        context.load_verify_locations(cafile=ca_file)
    return context


# --- the pinned httpcore network backend -----------------------------------------------


def _httpcore() -> Any:  # imported lazily to keep CLI start-up fast
    import httpcore

    return httpcore


class PinnedBackend:
    """An httpcore network backend that dials only checked addresses of pinned origins."""

    def __init__(self, guard: Guard) -> None:
        self._guard = guard
        self._pins: dict[tuple[str, int], Resolved] = {}

    def pin(self, resolved: Resolved) -> None:
        self._pins[(resolved.target.host, resolved.target.port)] = resolved

    def dial(self, host: str, port: int, timeout: float | None = None) -> socket.socket:
        """A socket connected to a checked address of the pinned ``host:port``.

        Raises `NetworkBlocked` for an origin nothing admitted, else `OSError`."""
        resolved = self._pins.get((host, port))
        if resolved is None:
            # Only an admitted origin may be dialed; nothing else in httpcore should ask.
            raise NetworkBlocked(
                f"refused {host}:{port}: not admitted by the guard", destination=f"{host}:{port}"
            )
        remaining = _remaining()
        limit = timeout if remaining is None else min(timeout or remaining, remaining)
        return self._guard.connect(resolved, max(limit or 30.0, 0.001))

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> Any:
        httpcore = _httpcore()
        try:
            sock = self.dial(host, port, timeout)
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return _stream_class()(sock)

    def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        raise NetworkBlocked("refused: Unix sockets are not reachable from host-side fetch")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


_STREAM: type | None = None


def _stream_class() -> type:
    """A NetworkStream over a connected socket (httpcore's own is private)."""
    global _STREAM
    if _STREAM is not None:
        return _STREAM
    httpcore = _httpcore()

    @contextmanager
    def mapped(timeout_exc: type, error_exc: type) -> Iterator[None]:
        try:
            yield
        except TimeoutError as exc:
            raise timeout_exc(str(exc) or "timed out") from exc
        except OSError as exc:
            raise error_exc(str(exc)) from exc

    def wait(timeout: float | None) -> float | None:
        remaining = _remaining()
        if remaining is None:
            return timeout
        if remaining <= 0:
            raise TimeoutError("total time limit reached")
        return remaining if timeout is None else min(timeout, remaining)

    base: Any = httpcore.NetworkStream  # a run-time base: httpcore is imported lazily

    class SocketStream(base):
        def __init__(self, sock: Any) -> None:
            self._sock = sock

        def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
            with mapped(httpcore.ReadTimeout, httpcore.ReadError):
                self._sock.settimeout(wait(timeout))
                return self._sock.recv(max_bytes)

        def write(self, buffer: bytes, timeout: float | None = None) -> None:
            with mapped(httpcore.WriteTimeout, httpcore.WriteError):
                while buffer:
                    self._sock.settimeout(wait(timeout))
                    sent = self._sock.send(buffer)
                    buffer = buffer[sent:]

        def close(self) -> None:
            self._sock.close()

        def start_tls(
            self,
            ssl_context: ssl.SSLContext,
            server_hostname: str | None = None,
            timeout: float | None = None,
        ) -> SocketStream:
            with mapped(httpcore.ConnectTimeout, httpcore.ConnectError):
                try:
                    self._sock.settimeout(wait(timeout))
                    wrapped = ssl_context.wrap_socket(self._sock, server_hostname=server_hostname)
                except Exception:
                    self.close()
                    raise
            return SocketStream(wrapped)

        def get_extra_info(self, info: str) -> Any:
            if info == "ssl_object" and isinstance(self._sock, ssl.SSLSocket):
                return self._sock
            if info == "client_addr":
                return self._sock.getsockname()
            if info == "server_addr":
                return self._sock.getpeername()
            if info == "socket":
                return self._sock
            if info == "is_readable":
                # poll, not select: a busy gateway holds descriptors past select's 1024.
                poller = select.poll()
                poller.register(self._sock, select.POLLIN)
                return bool(poller.poll(0))
            return None

    _STREAM = SocketStream
    return _STREAM


def _pinned_transport_class() -> type:
    import httpcore
    import httpx

    class PinnedTransport(httpx.HTTPTransport):
        """httpx's transport with its pool rebuilt on the pinned backend.

        Replacing ``_pool`` after ``__init__`` is the shape httpx's maintainers point to
        until a ``network_backend`` argument lands (encode/httpx#3749); the pool itself
        is built only through httpcore's public constructor.
        """

        def __init__(self, backend: PinnedBackend, context: ssl.SSLContext) -> None:
            super().__init__(verify=context, trust_env=False)
            self._pool = httpcore.ConnectionPool(
                ssl_context=context,
                # PinnedBackend implements httpcore's NetworkBackend by its methods, so
                # that this module need not import httpcore before the first request.
                network_backend=cast("httpcore.NetworkBackend", backend),
                max_connections=20,
                max_keepalive_connections=5,
                keepalive_expiry=5.0,
            )

    return PinnedTransport


def _pinned_transport(backend: PinnedBackend, context: ssl.SSLContext) -> Any:
    return _pinned_transport_class()(backend, context)


# --- the same pins under the MCP SDK's asynchronous client (HTTP upstreams) ------------


class AsyncPinnedBackend:
    """`PinnedBackend` as an httpcore2 asynchronous network backend: the same pins and the
    same guarded dial (in a worker thread, as it blocks), then anyio drives the socket."""

    def __init__(self, pinned: PinnedBackend) -> None:
        self.pinned = pinned

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Any = None,
    ) -> Any:
        import anyio
        import anyio.abc
        import httpcore2

        # httpcore2 does not export the stream of its own AnyIOBackend; reusing it keeps
        # TLS, timeouts and error mapping exactly as httpcore2 does them.
        from httpcore2._backends.anyio import AnyIOStream

        try:
            sock = await anyio.to_thread.run_sync(self.pinned.dial, host, port, timeout)
        except TimeoutError as exc:
            raise httpcore2.ConnectTimeout(str(exc)) from exc
        except OSError as exc:
            raise httpcore2.ConnectError(str(exc)) from exc
        return AnyIOStream(await anyio.abc.SocketStream.from_socket(sock))

    async def connect_unix_socket(self, *args: Any, **kwargs: Any) -> Any:
        raise NetworkBlocked("refused: Unix sockets are not reachable from host-side fetch")

    async def sleep(self, seconds: float) -> None:
        import anyio

        await anyio.sleep(seconds)


def guarded_async_client(
    access: NetworkAccess,
    *,
    tool: str,
    session: str | None = None,
    verify: ssl.SSLContext,
    timeout: float,
) -> Any:
    """An ``httpx2.AsyncClient`` (the MCP SDK's HTTP client) whose every request the guard
    and the policy admit first, and whose connections go only to the addresses that
    admission checked: a second DNS answer (rebinding) is never dialed. Redirects are not
    followed; the caller sees them."""
    import functools

    import anyio
    import httpcore2
    import httpx2

    pinned = PinnedBackend(access.guard)

    async def admit(request: httpx2.Request) -> None:
        # Every request, not only the first. Admission may look a name up or ask a
        # person, so it runs in a worker thread, off the event loop.
        check = functools.partial(
            access.admit_url, str(request.url), method=request.method, tool=tool, session=session
        )
        admission = await anyio.to_thread.run_sync(check)
        pinned.pin(admission.resolved)

    transport = httpx2.AsyncHTTPTransport(verify=verify, trust_env=False)
    # As for `PinnedTransport`: the pool rebuilt on the pinned backend, through
    # httpcore2's public constructor.
    transport._pool = httpcore2.AsyncConnectionPool(
        ssl_context=verify,
        network_backend=cast("httpcore2.AsyncNetworkBackend", AsyncPinnedBackend(pinned)),
        max_connections=20,
        max_keepalive_connections=5,
        keepalive_expiry=5.0,
    )
    return httpx2.AsyncClient(
        transport=transport,
        event_hooks={"request": [admit]},
        timeout=timeout,
        follow_redirects=False,
        trust_env=False,
    )
