"""The client side of the exec server (`agentvisor.exec.server`): hand an `ExecRequest` to a
running gateway or exec helper, start a helper, stop it. Imports only what a socket needs, so
the CLI starts in a few milliseconds; any trouble reaching a server means "no server" and the
CLI runs the command itself.

It uses the C modules `_socket` and `_signal` directly: the public `socket` and `signal`
wrap them in enums, and importing `enum` costs more than everything else here."""

from __future__ import annotations

import _socket as socket
import fcntl
import os
import sys

from . import proto
from .request import EXIT_REFUSED, ExecRequest

TYPE_CHECKING = False  # typing costs milliseconds on every `exec`
if TYPE_CHECKING:
    import signal  # the same functions and constants as _signal, which has no stubs
else:
    import _signal as signal

# fds 0, 1, 2 as the C ints SCM_RIGHTS carries (no `array` import: it pulls in collections).
_STDIO_FDS = b"".join(fd.to_bytes(4, sys.byteorder) for fd in (0, 1, 2))
# What the helper keeps of the environment that started it: where files are, nothing else
# (no PYTHONPATH: the helper imports only from its interpreter's installation).
_KEPT_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ")
_KEPT_PREFIXES = ("XDG_", "LC_")


def via_gateway(request: ExecRequest) -> int | None:
    """The command's exit status, or None when no server took it (a dry run never goes)."""
    if request.dry_run or request.environ.get("AGENTVISOR_NO_GATEWAY"):
        return None
    path = proto.socket_path(request.environ)
    if not os.path.exists(path):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        conn.connect(path)
        conn.sendmsg(
            [proto.encode_request(request)], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, _STDIO_FDS)]
        )
    except OSError:
        conn.close()
        return None
    return _wait(conn)


def _wait(conn: socket.socket) -> int | None:
    def forward(signum: int, frame: object) -> None:
        try:
            conn.send(b"K")
        except OSError:
            return

    previous = {
        signum: signal.signal(signum, forward)
        for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    while True:
        try:
            data = conn.recv(1 << 20)
        except InterruptedError:
            continue
        except OSError:
            data = b""
        if not data:
            sys.stderr.write("agentvisor: the gateway ended the run without a status\n")
            return EXIT_REFUSED
        kind, text = data[:1], data[1:].decode("utf-8", "surrogateescape")
        if kind == b"S":
            sys.stderr.write(text + "\n")
            sys.stderr.flush()
        elif kind == b"E":
            return int(text)
        elif kind == b"F":  # the server has no one to ask, or speaks another version
            conn.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            return None


def spawn(idle: float, environ: dict[str, str]) -> bool:
    """Start a helper in the background unless one (or a gateway) answers; True if started.

    The helper is host code serving every later caller, so nothing a sandboxed command can
    write may reach its imports: Python in isolated mode (``-I``: no current directory or
    script directory on ``sys.path``, no PYTHON* variables, no user site-packages), started
    in ``/`` and without the caller's PYTHONPATH. It imports agentvisor from the
    interpreter's own installation, whoever the caller was."""
    import subprocess  # already loaded by the run that precedes a spawn

    if idle <= 0 or environ.get("AGENTVISOR_NO_GATEWAY") or not _found_when_isolated(environ):
        return False
    path = proto.socket_path(environ)
    if answers(path):
        return False
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    env = {k: v for k, v in environ.items() if k in _KEPT_ENV or k.startswith(_KEPT_PREFIXES)}
    log = os.open(
        os.path.join(directory, "exec-helper.log"),
        os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
        0o600,
    )
    try:
        # The helper outlives this process: it holds none of the caller's other files
        # (close_fds: a pipe someone waits to see closed, for instance).
        subprocess.Popen(
            [sys.executable, "-I", "-m", "agentvisor", "exec-helper", "--idle", f"{idle:g}"],
            cwd="/",
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            close_fds=True,
            start_new_session=True,
        )
    finally:
        os.close(log)
    return True


def _found_when_isolated(environ: dict[str, str]) -> bool:
    """Whether ``python -I`` finds this agentvisor: not when it was loaded from where
    isolated mode does not look (user site-packages, PYTHONPATH, the current directory);
    such an install runs every `exec` in its own process instead."""
    import site

    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    left_out = [site.getusersitepackages(), os.getcwd(), *environ.get("PYTHONPATH", "").split(":")]
    return here not in {os.path.abspath(entry) for entry in left_out if entry}


def stop_running(wait: float = 10.0) -> int | None:
    """End the running helper and wait for it to go; its pid, or None when none runs."""
    import time

    pid = running_pid()
    if pid is None:
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while running_pid() == pid and time.monotonic() < deadline:
        time.sleep(0.05)
    return pid


def running_pid() -> int | None:
    """The pid of the helper holding the lock, if it is one."""
    lock = lock_file()
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return None  # nobody holds it
    except BlockingIOError:
        pass
    finally:
        os.close(lock)
    try:
        with open(_lock_path()) as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"exec-helper" not in f.read():
                return None
    except (OSError, ValueError):
        return None
    return pid


def answers(path: str) -> bool:
    """Whether something listens on the exec socket (a file alone may be stale)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def lock_file() -> int:
    """The helper's lock, held while it runs and holding its pid."""
    path = _lock_path()
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _lock_path() -> str:
    return os.path.join(os.path.dirname(proto.socket_path(os.environ)), "exec-helper.lock")
