"""The exec helper: an exec server that `agentvisor exec` starts for itself.

Every `agentvisor exec` run in its own process pays for Python's start and for loading
the config, the policy engine and the sandbox; on a slow machine that is a hundred
milliseconds and more, twenty times a sandbox start. When no gateway is running, the
first `agentvisor exec` therefore leaves a helper behind (like a build daemon): a
detached `agentvisor exec-helper` serving the exec socket (`agentvisor.execserver`), so
the next runs only pass their arguments, environment and terminal to it.

- It runs exactly what the CLI would run in-process, with the caller's config, working
  directory and environment from each request. A command that needs a person's answer
  is handed back, and the CLI asks on its own terminal.
- It keeps no environment of its own beyond what finding files needs (no credentials).
- It exits after ``gateway.exec_helper_idle`` seconds without a run (0: never start one),
  when agentvisor's code changes, and when a gateway takes the socket over.
- ``AGENTVISOR_NO_GATEWAY=1`` neither uses nor starts one; ``agentvisor exec-helper
  --stop`` ends a running one.
"""

from __future__ import annotations

import _socket
import contextlib
import fcntl
import os
import sys

from . import execproto, paths

# What the helper keeps of the environment that started it: where files are, nothing else.
_KEPT_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "PYTHONPATH")
_KEPT_PREFIXES = ("XDG_", "LC_")


def spawn(idle: float, environ: dict[str, str]) -> bool:
    """Start a helper in the background unless one (or a gateway) answers; True if started."""
    if idle <= 0 or environ.get("AGENTVISOR_NO_GATEWAY"):
        return False
    path = execproto.socket_path(environ)
    if _answers(path):
        return False
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    env = {k: v for k, v in environ.items() if k in _KEPT_ENV or k.startswith(_KEPT_PREFIXES)}
    log = os.path.join(directory, "exec-helper.log")
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
        (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    # The helper outlives this process: it must hold none of the caller's other files
    # (a pipe someone waits to see closed, for instance).
    actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _open_fds() if fd > 2]
    os.posix_spawn(
        sys.executable,
        [sys.executable, "-m", "agentvisor", "exec-helper", "--idle", f"{idle:g}"],
        env,
        file_actions=actions,
        setsid=True,
    )
    return True


def serve(idle: float) -> int:
    """The helper itself: serve the exec socket until idle, outdated or displaced."""
    import signal
    import threading

    from .execserver import ExecServer
    from .sandbox.runner import adopt_orphans

    lock = _lock_file()
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another helper runs, or is starting
    os.ftruncate(lock, 0)
    os.write(lock, str(os.getpid()).encode())
    path = execproto.socket_path(os.environ)
    if _answers(path):
        return 0  # a gateway serves exec here
    os.chdir("/")  # hold no user directory busy
    adopt_orphans()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    server = ExecServer(path=path, defer_asks=True).start()
    stamp = _code_stamp()
    print(f"agentvisor exec helper {os.getpid()}: serving {path}", file=sys.stderr, flush=True)
    reason = "stopped"
    try:
        while not stop.wait(1.0):
            if server.idle_for() >= idle:
                reason = f"idle for {idle:g} s"
            elif not server.owns_socket():
                reason = "a gateway took the socket over"
            elif _code_stamp() != stamp:
                reason = "agentvisor's code changed"
            else:
                continue
            break
    finally:
        server.stop()
        print(
            f"agentvisor exec helper {os.getpid()}: exiting: {reason}", file=sys.stderr, flush=True
        )
    return 0


def stop_running(wait: float = 10.0) -> int | None:
    """End the running helper and wait for it to go; its pid, or None when none runs."""
    import signal
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
    lock = _lock_file()
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return None  # nobody holds it
    except BlockingIOError:
        pass
    finally:
        os.close(lock)
    try:
        with open(os.path.join(paths.runtime_dir(), "exec-helper.lock")) as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if b"exec-helper" not in f.read():
                return None
    except (OSError, ValueError):
        return None
    return pid


def _answers(path: str) -> bool:
    """Whether something listens on the exec socket (a file alone may be stale). The C
    module `_socket`: the public one imports enum, which the CLI need not pay for."""
    probe = _socket.socket(_socket.AF_UNIX, _socket.SOCK_SEQPACKET)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def _lock_file() -> int:
    directory = paths.runtime_dir()
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    return os.open(directory / "exec-helper.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _open_fds() -> list[int]:
    with contextlib.suppress(OSError):
        return [int(name) for name in os.listdir("/proc/self/fd")]
    return []


def _code_stamp() -> int:
    """The newest modification time among agentvisor's modules: an upgrade or an edit
    must not leave an old helper answering."""
    root = os.path.dirname(os.path.abspath(__file__))
    newest = 0
    for directory, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                with contextlib.suppress(OSError):
                    newest = max(newest, os.stat(os.path.join(directory, name)).st_mtime_ns)
    return newest
