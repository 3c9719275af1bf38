"""The host functions a Wasm tool may import, and the capability gate on the network.

A tool has no sockets: WASI as configured here offers none. Its one way out is
``agentvisor.http_request(ptr, len) -> i64``, which sends the request through the same
network layer as the agent's own web tools (destination guard, network policy, approvals,
secret placeholders, redaction, size and time caps) after `ToolAccess` has checked the
tool's own grants: every hop's host must be among the tool's granted hosts, and every
secret placeholder among its granted secrets. Both gates must pass; neither widens the
other.
"""

from __future__ import annotations

import contextvars
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..actions import Decision
from ..errors import AgentvisorError, NetworkBlocked, PolicyDenied

if TYPE_CHECKING:
    from ..net.access import Admission, NetworkAccess
    from ..net.client import Fetcher
    from ..net.guard import Guard, Target

IMPORT_MODULE = "agentvisor"
MAX_REQUEST_BYTES = 8 * 1024 * 1024
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class ToolAccess:
    """`NetworkAccess` narrowed to one tool's granted hosts and secrets.

    The `Fetcher` asks it to admit every hop (redirects included) and to approve every
    secret it substitutes, so a redirect to another host or a placeholder the tool was not
    granted is refused before anything is sent.
    """

    def __init__(
        self, base: NetworkAccess, tool: str, hosts: list[str], secrets: list[str]
    ) -> None:
        self.base = base
        self.tool = tool
        self.hosts = list(hosts)
        self.secrets = frozenset(secrets)

    @property
    def guard(self) -> Guard:
        return self.base.guard

    def admit_url(
        self,
        url: str,
        *,
        method: str = "GET",
        tool: str = "fetch",
        session: str | None = None,
        resolve: bool = True,
    ) -> Admission:
        target = self._granted(url)
        return self.base.admit(target, method=method, tool=tool, session=session, resolve=resolve)

    def _granted(self, url: str) -> Target:
        from ..net.guard import parse_url
        from ..net.secrets import host_matches

        target = parse_url(url)
        if not host_matches(self.hosts, target.host, target.port):
            granted = ", ".join(self.hosts) or "none"
            raise NetworkBlocked(
                f"refused {target.hostport}: Wasm tool {self.tool} was not "
                f"granted this host (granted: {granted})",
                destination=target.hostport,
                rule=f"wasm:{self.tool}:network",
            )
        return target

    def preview(
        self, url: str, *, method: str = "GET", tool: str = "fetch", session: str | None = None
    ) -> Decision:
        """What admitting ``url`` would meet, nobody asked (`NetworkAccess.preview`)."""
        try:
            self._granted(url)
        except NetworkBlocked as exc:
            return Decision("deny", str(exc), rule=exc.rule)
        return self.base.preview(url, method=method, tool=tool, session=session)

    def secret_use(
        self, name: str, host: str, *, tool: str, session: str | None = None
    ) -> Decision:
        from ..net.secrets import placeholder

        if name not in self.secrets:
            granted = ", ".join(sorted(self.secrets)) or "none"
            return Decision(
                "deny",
                f"Wasm tool {self.tool} was not granted the secret "
                f"{placeholder(name)} (granted: {granted})",
                rule=f"wasm:{self.tool}:secrets",
            )
        return self.base.secret_use(name, host, tool=tool, session=session)


class HostCalls:
    """What the host functions do for one call: the tool's own fetcher and session."""

    def __init__(
        self, tool: str, fetcher: Callable[[], Fetcher] | None, session: str | None
    ) -> None:
        self.tool = tool  # the name the policy sees as the calling tool
        self._fetcher = fetcher
        self.session = session

    def http_request(self, request: Any) -> dict[str, Any]:
        """One request for the tool; refusals and failures come back as ``error``."""
        problem = _request_problem(request)
        if problem:
            return {"error": f"bad request: {problem}", "refused": False}
        if self._fetcher is None:
            return {
                "error": f"refused: Wasm tool {self.tool} was granted no network access",
                "refused": True,
            }
        fetcher = self._fetcher()
        try:
            result = fetcher.request(
                request.get("method", "GET"),
                request["url"],
                headers=request.get("headers"),
                body=request.get("body"),
                tool=self.tool,
                session=self.session,
            )
        except (NetworkBlocked, PolicyDenied) as exc:
            return {"error": str(exc), "refused": True}
        except AgentvisorError as exc:
            return {"error": str(exc), "refused": False}
        from ..net.tools import response_dict

        return fetcher.secrets.redactor().any(response_dict(result))


def _request_problem(request: Any) -> str | None:
    if not isinstance(request, dict):
        return "a JSON object with method, url, headers and body"
    unknown = set(request) - {"method", "url", "headers", "body"}
    if unknown:
        return f"unknown keys {sorted(unknown)} (known: method, url, headers, body)"
    if not isinstance(request.get("url"), str):
        return "url must be a string"
    method = request.get("method", "GET")
    if not isinstance(method, str) or method.upper() not in _METHODS:
        return f"method must be one of {', '.join(sorted(_METHODS))}"
    headers = request.get("headers", {})
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        return "headers must map names to strings"
    if not isinstance(request.get("body", ""), str | None):
        return "body must be a string"
    return None


# The call the current thread is running; host functions find their state here.
current: contextvars.ContextVar[HostCalls | None] = contextvars.ContextVar(
    "agentvisor_wasm_call", default=None
)


def define(linker: Any) -> None:
    """Add the ``agentvisor`` host functions to a wasmtime linker."""
    import wasmtime

    i32, i64 = wasmtime.ValType.i32(), wasmtime.ValType.i64()
    linker.define_func(
        IMPORT_MODULE,
        "http_request",
        wasmtime.FuncType([i32, i32], [i64]),
        _http_request,
        access_caller=True,
    )


# name -> (params, results) of every host function, for checking a module's imports.
SIGNATURES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "http_request": (("i32", "i32"), ("i64",)),
}


def _http_request(caller: Any, ptr: int, length: int) -> int:
    # Never raises: wasmtime-py passes a host function's exception on through a
    # process-wide slot, which concurrent calls on other threads could pick up.
    calls = current.get()
    memory = caller.get("memory")
    if calls is None or memory is None:
        return 0
    try:
        request = json.loads(
            read_guest(caller, memory, ptr, length, MAX_REQUEST_BYTES, "the request")
        )
    except ValueError as exc:
        answer: dict[str, Any] = {"error": f"bad request: {exc}", "refused": False}
    else:
        answer = calls.http_request(request)
    return write_guest(caller, memory, json.dumps(answer).encode("utf-8"))


def read_guest(store: Any, memory: Any, ptr: int, length: int, limit: int, what: str) -> bytes:
    """Bytes the tool points at; ValueError for a pointer outside its memory."""
    ptr &= 0xFFFFFFFF
    length &= 0xFFFFFFFF
    if length > limit:
        raise ValueError(f"{what} is {length} bytes, more than the limit of {limit}")
    if ptr + length > memory.data_len(store):
        raise ValueError(f"{what} points outside the tool's memory")
    return bytes(memory.read(store, ptr, ptr + length))


def write_guest(caller: Any, memory: Any, data: bytes) -> int:
    """Copy ``data`` into memory the tool allocates; 0 when it cannot (memory limit)."""
    import wasmtime

    try:
        ptr = caller.get("av_alloc")(caller, len(data)) & 0xFFFFFFFF
    except (wasmtime.Trap, wasmtime.WasmtimeError):  # e.g. the time limit: it recurs
        return 0
    if ptr == 0 or ptr + len(data) > memory.data_len(caller):
        return 0
    memory.write(caller, data, ptr)
    return pack(ptr, len(data))


def pack(ptr: int, length: int) -> int:
    """(ptr << 32) | len as the signed i64 wasm returns."""
    value = (ptr << 32) | length
    return value - (1 << 64) if value >= 1 << 63 else value
