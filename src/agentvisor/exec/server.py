"""The exec server: `agentvisor exec` through a running gateway, like docker → dockerd.

A CLI start pays for Python, config validation, the policy engine and (on cgroup hosts) a
cgroup migration on every run. When `agentvisor serve` runs, it also listens on a Unix
socket in the user's private runtime directory; the CLI then sends its arguments, working
directory, environment and its stdin/stdout/stderr (as SCM_RIGHTS file descriptors) and
waits for the exit status, importing almost nothing. The server runs exactly what
``agentvisor exec`` runs in-process (`agentvisor.exec.run.run`), with the gateway's approval
channels. Without a server, the CLI does it all itself.

Without a gateway, `agentvisor exec` starts an exec helper (`agentvisor.exec.helper`): the
same server with no approval channel of its own. A command that needs a person's answer
is handed back ("F"), and the CLI asks on its own terminal.

Only processes of the same user may connect (checked with SO_PEERCRED); the socket's
directory is 0700 and, like every agentvisor directory, invisible inside sandboxes.

The wire format is in `agentvisor.exec.proto`.
"""

from __future__ import annotations

import array
import contextlib
import os
import socket
import struct
import threading
import time
from collections import OrderedDict
from typing import Any, NoReturn

from .. import paths
from ..errors import AgentvisorError
from ..net import unixsock
from . import proto
from .request import EXIT_REFUSED, ExecRequest
from .run import run

MAX_REQUEST = 1 << 20


def socket_path() -> str:
    return str(paths.runtime_dir() / "exec.sock")  # = proto.socket_path(os.environ)


class AskDeferred(Exception):
    """An ask this server has no one to put to; the CLI asks on its own terminal."""


class _DeferAsks:
    """The broker of a server without an approval channel (the exec helper)."""

    def resolve(self, action: object, context: object, decision: object) -> NoReturn:
        raise AskDeferred


class ExecServer:
    def __init__(
        self, broker: Any = None, path: str | None = None, defer_asks: bool = False
    ) -> None:
        """``defer_asks``: hand commands that need an answer back to the CLI ("F")."""
        self.broker = _DeferAsks() if defer_asks else broker
        self.defer_asks = defer_asks
        self.path = path or socket_path()
        self._server: socket.socket | None = None
        self._inode: int | None = None
        self._active = 0
        self._last_active = time.monotonic()
        self._activity = threading.Lock()
        self._kept: OrderedDict[tuple[object, ...], Any] = OrderedDict()
        self._kept_lock = threading.Lock()

    def _reuse(self, key: tuple[object, ...], make: Any) -> Any:
        """Sandboxes and policy engines for inputs seen before (configs compare by value,
        so an edited config file makes new ones)."""
        with self._kept_lock:
            if key in self._kept:
                self._kept.move_to_end(key)
                return self._kept[key]
        value = make()
        with self._kept_lock:
            self._kept[key] = value
            while len(self._kept) > 32:
                self._kept.popitem(last=False)
        return value

    def start(self) -> ExecServer:
        directory = os.path.dirname(self.path)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self._server = unixsock.listen(self.path, socket.SOCK_SEQPACKET, 64)
        self._inode = os.stat(self.path).st_ino
        threading.Thread(target=self._accept, daemon=True, name="agentvisor-exec").start()
        return self

    def owns_socket(self) -> bool:
        """Whether the socket file is still ours (a gateway started later replaces it)."""
        try:
            return os.stat(self.path).st_ino == self._inode
        except OSError:
            return False

    def idle_for(self) -> float:
        """Seconds since the last run ended; 0 while one is running."""
        with self._activity:
            return 0.0 if self._active else time.monotonic() - self._last_active

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            owned = self.owns_socket()
            unixsock.close(server)
            if owned:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)

    def _accept(self) -> None:
        while self._server is not None:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(
                target=self._serve, args=(conn,), daemon=True, name="agentvisor-exec-run"
            ).start()

    def _serve(self, conn: socket.socket) -> None:
        fds: list[int] = []
        with self._activity:
            self._active += 1
        try:
            pid, uid, _ = struct.unpack(
                "3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            )
            if uid != os.getuid():
                _send(conn, "S", "agentvisor: refused: another user's exec server")
                _send(conn, "E", "125")
                return
            data, fds = _receive(conn)
            try:
                request = proto.decode_request(data)
            except ValueError:
                _send(conn, "F", "")  # another version's client: it runs the command itself
                return
            try:
                code = self._run(conn, request, fds, pid)
            except AskDeferred:
                _send(conn, "F", "")
                return
            _send(conn, "E", str(code))
        except (OSError, ValueError):
            pass
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            conn.close()
            with self._activity:
                self._active -= 1
                self._last_active = time.monotonic()

    def _run(self, conn: socket.socket, request: ExecRequest, fds: list[int], pid: int) -> int:
        def say(text: str) -> None:
            _send(conn, "S", text)

        if len(fds) != 3:
            say("agentvisor: the exec request came without its terminal")
            return EXIT_REFUSED

        def network_asks_need_a_person(config: Any) -> None:
            # Through the egress proxy, a destination may need an answer while the
            # command runs, when it can no longer be handed back.
            if self.defer_asks and (request.network or config.sandbox.network) == "proxy":
                raise AskDeferred

        try:
            return run(
                request,
                say=say,
                stdio=fds,
                cancel_fd=conn.fileno(),
                caller=pid,
                broker=self.broker,
                reuse=self._reuse,
                config_seen=network_asks_need_a_person,
            )
        except AgentvisorError as exc:
            say(f"agentvisor: {exc}")
            return EXIT_REFUSED


def _send(conn: socket.socket, kind: str, text: str) -> None:
    conn.send(proto.message(kind, text))


def _receive(conn: socket.socket) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    data, ancdata, _, _ = conn.recvmsg(MAX_REQUEST, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return data, list(fds)
