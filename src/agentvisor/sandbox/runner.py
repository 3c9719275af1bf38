"""Running a prepared sandbox command: limits, timeout, output, and cleanup.

Shared by the backends that start a local process (bwrap, local). The whole process
tree is ended when the command ends or times out: the pid namespace does that for
bwrap, the run's cgroup (when there is one) does it for everything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from .base import EXIT_TIMEOUT, Chunk, Result
from .layout import Layout
from .limits import Cgroup, LimitPlan


@dataclass
class Prepared:
    argv: list[str]
    env: Mapping[str, str]
    layout: Layout | None
    limits: LimitPlan
    pass_fds: Sequence[int] = field(default_factory=tuple)
    cwd: str | None = None

    def close_fds(self) -> None:
        """Close the fds handed to the child, once (a number may be reused afterwards)."""
        fds, self.pass_fds = self.pass_fds, ()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


class Launch:
    """One started sandbox process with its cgroup slot; `close` always cleans up.

    ``stdin``/``stdout``/``stderr`` take `subprocess` values (PIPE, DEVNULL, None to share
    the caller's).
    """

    def __init__(self, prepared: Prepared, *, stdin: int | None, stdout: int | None,
                 stderr: int | None) -> None:
        self.prepared = prepared
        self.cgroup: Cgroup | None = None
        self.start = time.monotonic()
        try:
            self.cgroup = prepared.limits.acquire_cgroup()
            preexec = prepared.limits.preexec(self.cgroup)
            try:
                self.proc = subprocess.Popen(
                    prepared.argv, env=dict(prepared.env), pass_fds=tuple(prepared.pass_fds),
                    stdin=stdin, stdout=stdout, stderr=stderr, preexec_fn=preexec,
                    cwd=prepared.cwd,
                )
            finally:
                for fd in preexec.fds:  # type: ignore[attr-defined]
                    os.close(fd)
        except BaseException:
            self.close()
            raise

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill_all()

    def result(self, code: int, out: bytes, err: bytes, timed_out: bool) -> Result:
        hit = ("memory",) if self.cgroup is not None and self.cgroup.oom_killed() else ()
        return Result(exit_code=EXIT_TIMEOUT if timed_out else _status(code), stdout=out,
                      stderr=err, timed_out=timed_out, duration=time.monotonic() - self.start,
                      limits_hit=hit)

    def close(self) -> None:
        self.prepared.close_fds()
        if self.cgroup is not None:
            self.cgroup.release()
        if self.prepared.layout is not None:
            self.prepared.layout.cleanup()


def run(prepared: Prepared, *, timeout: float, stdin: bytes | None = None,
        capture: bool = True) -> Result:
    pipe = subprocess.PIPE if capture else None
    # Captured runs get no terminal input; pass-through runs share the caller's.
    stdin_mode = subprocess.PIPE if stdin is not None else (subprocess.DEVNULL if capture else None)
    launch = Launch(prepared, stdin=stdin_mode, stdout=pipe, stderr=pipe)
    try:
        try:
            out, err = launch.proc.communicate(stdin, timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            launch.kill()
            out, err = launch.proc.communicate()
            timed_out = True
        except BaseException:
            launch.kill()
            launch.proc.wait()
            raise
        return launch.result(launch.proc.returncode, out or b"", err or b"", timed_out)
    finally:
        launch.close()


def run_attached(prepared: Prepared, *, timeout: float, stdio: Sequence[int],
                 cancel_fd: int) -> Result:
    """Run with someone else's stdin/stdout/stderr (fds received from a client) and end
    the sandbox early when ``cancel_fd`` becomes readable (the client asked, or left)."""
    import select

    launch = Launch(prepared, stdin=stdio[0], stdout=stdio[1], stderr=stdio[2])
    try:
        pidfd = os.pidfd_open(launch.proc.pid)
        try:
            deadline = launch.start + timeout
            timed_out = False
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    timed_out = True
                    break
                ready, _, _ = select.select([pidfd, cancel_fd], [], [], remaining)
                if pidfd in ready:
                    break
                if cancel_fd in ready:
                    launch.kill()
                    break
        finally:
            os.close(pidfd)
        if timed_out:
            launch.kill()
        code = launch.proc.wait()
        return launch.result(code, b"", b"", timed_out)
    finally:
        launch.close()


def stream(prepared: Prepared, *, timeout: float) -> Iterator[Chunk]:
    """Yield output as it comes; the last chunk (stream "exit") carries the `Result`."""
    import selectors

    launch = Launch(prepared, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE)
    try:
        deadline = launch.start + timeout
        sel = selectors.DefaultSelector()
        assert launch.proc.stdout is not None and launch.proc.stderr is not None
        sel.register(launch.proc.stdout, selectors.EVENT_READ, "stdout")
        sel.register(launch.proc.stderr, selectors.EVENT_READ, "stderr")
        timed_out = False
        while sel.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                launch.kill()
                break
            for key, _ in sel.select(timeout=remaining):
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                yield Chunk(stream=key.data, data=data)
        sel.close()
        code = launch.proc.wait()
        yield Chunk(stream="exit", result=launch.result(code, b"", b"", timed_out))
    except BaseException:
        launch.kill()
        launch.proc.wait()
        raise
    finally:
        launch.close()


def _status(code: int) -> int:
    """Shell convention: a command ended by signal N exits with 128 + N."""
    return 128 - code if code < 0 else code
