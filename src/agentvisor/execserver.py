"""The exec server: `agentvisor exec` through a running gateway, like docker → dockerd.

A CLI start pays for Python, config validation, the policy engine and (on cgroup hosts) a
cgroup migration on every run. When `agentvisor serve` runs, it also listens on a Unix
socket in the user's private runtime directory; the CLI then sends its arguments, working
directory, environment and its stdin/stdout/stderr (as SCM_RIGHTS file descriptors) and
waits for the exit status, importing almost nothing. The server runs exactly what
``agentvisor exec`` runs in-process (`cli.exec.execute`), with the gateway's approval
channels. Without a server, the CLI does it all itself.

Only processes of the same user may connect (checked with SO_PEERCRED); the socket's
directory is 0700 and, like every agentvisor directory, invisible inside sandboxes.

The wire format is in `agentvisor.execproto`.
"""

from __future__ import annotations

import array
import contextlib
import os
import socket
import struct
import threading
from collections import OrderedDict
from typing import Any

from . import execproto, paths, unixsock
from .errors import AgentvisorError

MAX_REQUEST = 1 << 20


def socket_path() -> str:
    return str(paths.runtime_dir() / "exec.sock")  # = execproto.socket_path(os.environ)


class ExecServer:
    def __init__(self, broker: Any = None, path: str | None = None) -> None:
        self.broker = broker
        self.path = path or socket_path()
        self._server: socket.socket | None = None
        self._parser: Any = None  # built once: argparse setup costs more than a sandbox
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
        threading.Thread(target=self._accept, daemon=True, name="agentvisor-exec").start()
        return self

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            unixsock.close(server)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)

    def _accept(self) -> None:
        while self._server is not None:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True,
                             name="agentvisor-exec-run").start()

    def _serve(self, conn: socket.socket) -> None:
        fds: list[int] = []
        try:
            uid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                      struct.calcsize("3i")))[1]
            if uid != os.getuid():
                _send(conn, "S", "agentvisor: refused: another user's exec server")
                _send(conn, "E", "125")
                return
            data, fds = _receive(conn)
            args, cwd, env = execproto.decode_request(data)
            code = self._run(conn, args, cwd, env, fds)
            _send(conn, "E", str(code))
        except (OSError, ValueError):
            pass
        finally:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.close(fd)
            conn.close()

    def _run(self, conn: socket.socket, argv: list[str], cwd: str, env: dict[str, str],
             fds: list[int]) -> int:
        from .cli import EXIT_REFUSED, build_parser
        from .cli.exec import execute

        if self._parser is None:
            self._parser = build_parser()
        def say(text: str) -> None:
            _send(conn, "S", text)

        if len(fds) != 3:
            say("agentvisor: the exec request came without its terminal")
            return EXIT_REFUSED
        try:
            args = self._parser.parse_args(argv)
            return execute(args, cwd=cwd, environ=env, say=say,
                           stdio=fds, cancel_fd=conn.fileno(), broker=self.broker,
                           reuse=self._reuse)
        except AgentvisorError as exc:
            say(f"agentvisor: {exc}")
            return EXIT_REFUSED
        except SystemExit:  # argparse rejected the arguments (it wrote to our stderr)
            say("agentvisor: invalid exec arguments; see `agentvisor exec --help`")
            return 2


def _send(conn: socket.socket, kind: str, text: str) -> None:
    conn.send(execproto.message(kind, text))


def _receive(conn: socket.socket) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    data, ancdata, _, _ = conn.recvmsg(MAX_REQUEST, socket.CMSG_SPACE(3 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return data, list(fds)
