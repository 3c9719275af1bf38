"""The exec helper: an exec server that `agentvisor exec` starts for itself.

Every `agentvisor exec` run in its own process pays for Python's start and for loading
the config, the policy engine and the sandbox; on a slow machine that is a hundred
milliseconds and more, twenty times a sandbox start. When no gateway is running, the
first `agentvisor exec` therefore leaves a helper behind (like a build daemon): a
detached `agentvisor exec-helper` serving the exec socket (`agentvisor.exec.server`), so
the next runs only pass their arguments, environment and terminal to it.

- It runs exactly what the CLI would run in-process, with the caller's config, working
  directory and environment from each request. A command that needs a person's answer
  is handed back, and the CLI asks on its own terminal.
- It keeps no environment of its own beyond what finding files needs (no credentials).
- It exits after ``gateway.exec_helper_idle`` seconds without a run (0: never start one),
  when agentvisor's code changes, and when a gateway takes the socket over.
- ``AGENTVISOR_NO_GATEWAY=1`` neither uses nor starts one; ``agentvisor exec-helper
  --stop`` ends a running one.

Starting and stopping it is the client's part (`agentvisor.exec.client`); this module is
the helper process itself.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys

from . import proto
from .client import answers, lock_file


def serve(idle: float) -> int:
    """The helper itself: serve the exec socket until idle, outdated or displaced."""
    import signal
    import threading

    from ..sandbox.runner import adopt_orphans
    from .server import ExecServer

    lock = lock_file()
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another helper runs, or is starting
    os.ftruncate(lock, 0)
    os.write(lock, str(os.getpid()).encode())
    path = proto.socket_path(os.environ)
    if answers(path):
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


def _code_stamp() -> int:
    """The newest modification time among agentvisor's modules: an upgrade or an edit
    must not leave an old helper answering."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # agentvisor/
    newest = 0
    for directory, _, files in os.walk(root):
        for name in files:
            if name.endswith(".py"):
                with contextlib.suppress(OSError):
                    newest = max(newest, os.stat(os.path.join(directory, name)).st_mtime_ns)
    return newest
