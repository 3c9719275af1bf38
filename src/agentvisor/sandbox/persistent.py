"""A sandbox that lives as long as a session: commands join it instead of building a new one.

One bwrap sandbox is started with `spawner.py` as its only process; each command is a
message over an inherited socket pair (no socket file inside the sandbox), with its
stdin/stdout/stderr passed as file descriptors. Files in the scratch space and
background processes survive between calls, as in a reused container; the cgroup slot
(memory, pids) is held for the sandbox's whole life. `close` ends everything.
"""

from __future__ import annotations

import array
import contextlib
import itertools
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import SandboxError
from .base import EXIT_TIMEOUT, Attachment, Result
from .runner import Launch, OutputBuffer

if TYPE_CHECKING:
    from .bwrap import BwrapBackend

SPAWNER_INSIDE = "/run/agentvisor/spawner.py"
# After a command exits, its output is complete once its pipes reach end-of-file, or (when
# background children still hold them open) once they stay empty this long.
OUTPUT_GRACE = 0.05
# Never wait longer than this for that (a background child that keeps printing).
OUTPUT_SETTLE_MAX = 2.0
# How often a reader looks whether its command has exited, while its pipe is quiet.
EXIT_CHECK = 0.25
# A session sandbox idle this long may end to give its cgroup slot to another sandbox.
RECLAIM_AFTER = 1.0


class Job:
    """One command started in a persistent sandbox."""

    def __init__(self, job_id: int, argv: Sequence[str]) -> None:
        self.id = job_id
        self.argv = list(argv)
        self.pid: int | None = None
        self.status: int | None = None
        self.error: str | None = None
        self.started = time.monotonic()
        self.ended: float | None = None
        self.stdout = OutputBuffer()
        self.stderr = OutputBuffer()
        self.killed = False
        self._started_event = threading.Event()
        self._exit_event = threading.Event()
        self._settled: list[threading.Event] = []  # one per output pipe, see _drain

    @property
    def running(self) -> bool:
        return self.status is None and self.error is None

    def wait(self, timeout: float | None) -> bool:
        return self._exit_event.wait(timeout)


class PersistentSandbox:
    """A long-lived bwrap sandbox for one session."""

    def __init__(
        self,
        backend: BwrapBackend,
        *,
        attachment: Attachment | None = None,
        ready_timeout: float = 30.0,
    ) -> None:
        self.backend = backend
        extra = attachment or Attachment()
        self._env = {**backend.env, **extra.env}
        self._ids = itertools.count(1)
        self._jobs: dict[int, Job] = {}
        self._send_lock = threading.Lock()
        # Taken by `start` and `reclaim`: a sandbox given back is one that runs nothing.
        self._state_lock = threading.Lock()
        self.closed = False
        host_end, inside_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._control = host_end
        python, binds = _interpreter()
        attachment = Attachment(
            binds=extra.binds,
            ro_binds={**extra.ro_binds, **binds},
            ro_data={**extra.ro_data, SPAWNER_INSIDE: _spawner_source()},
            env=extra.env,
            argv_prefix=extra.argv_prefix,
            overlay=extra.overlay,
        )
        inside_fd = inside_end.detach()
        prepared = backend.prepare(
            [python, "-I", "-S", SPAWNER_INSIDE, str(inside_fd)],
            attachment=attachment,
            inherit_fds=[inside_fd],
            command_is_init=True,
        )
        try:
            self._launch = Launch(
                prepared,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
        finally:
            prepared.close_fds()  # the child has its copies; ours would only leak
        self._control.settimeout(ready_timeout)
        try:
            hello = json.loads(self._control.recv(65536) or b"{}")
        except (OSError, ValueError) as exc:
            hello = {"error": str(exc)}
        if hello.get("op") != "ready":
            self._launch.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._launch.proc.wait(5)
            detail = self._stderr() or hello  # read before close() closes the pipe
            self.close()
            raise SandboxError(f"the persistent sandbox did not start: {detail}")
        self._control.settimeout(None)
        self._reader = threading.Thread(
            target=self._read_control, daemon=True, name="agentvisor-sandbox-control"
        )
        self._reader.start()
        self._last_used = time.monotonic()
        backend.limits.reclaimable.append(self)

    # -- commands -----------------------------------------------------------------------

    def start(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        stdin: bytes | None = None,
    ) -> Job:
        """Start ``argv`` inside; returns at once with a `Job` that collects its output."""
        with self._state_lock:
            if self.closed:
                raise SandboxError("the session's sandbox has ended")
            job = Job(next(self._ids), argv)
            self._jobs[job.id] = job
            self._last_used = time.monotonic()
        in_r, in_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        message = {
            "op": "spawn",
            "id": job.id,
            "argv": list(argv),
            "cwd": str(cwd or self.backend.layout.workspace),
            "env": {**self._env, **(env or {})},
        }
        try:
            self._send(message, [in_r, out_w, err_w])
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        self._feed_stdin(in_w, stdin or b"")
        for fd, buffer in ((out_r, job.stdout), (err_r, job.stderr)):
            settled = threading.Event()
            reader = threading.Thread(
                target=_drain, args=(fd, buffer, job._exit_event, settled), daemon=True
            )
            reader.start()
            job._settled.append(settled)
        job._started_event.wait(10)
        if job.error:
            raise SandboxError(f"cannot start {argv[0]}: {job.error}")
        return job

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        env: Mapping[str, str] | None = None,
    ) -> Result:
        """Run ``argv`` and wait (at most ``timeout`` seconds, then kill it)."""
        timeout = timeout or self.backend.cfg.timeout
        job = self.start(argv, cwd=cwd, env=env, stdin=stdin)
        timed_out = not job.wait(timeout)
        if timed_out:
            self.kill(job)
            job.wait(5)
        # Not a fixed grace period: a reader thread scheduled late (a loaded machine) would
        # return "exit 0, no output" for a command that printed.
        for settled in job._settled:
            settled.wait(OUTPUT_SETTLE_MAX)
        self._jobs.pop(job.id, None)
        status = EXIT_TIMEOUT if timed_out else (job.status if job.status is not None else 125)
        return Result(
            exit_code=status,
            stdout=job.stdout.value(),
            stderr=job.stderr.value(),
            timed_out=timed_out,
            duration=time.monotonic() - job.started,
        )

    def kill(self, job: Job) -> None:
        job.killed = True
        if job.running and not self.closed:
            self._send({"op": "kill", "id": job.id}, [])

    def jobs(self) -> list[Job]:
        return list(self._jobs.values())

    def job(self, job_id: int) -> Job | None:
        return self._jobs.get(job_id)

    def forget(self, job: Job) -> None:
        self._jobs.pop(job.id, None)

    @property
    def alive(self) -> bool:
        return not self.closed and self._launch.proc.poll() is None

    # -- giving the cgroup slot back (limits.SlotHolder) ---------------------------------

    def idle_since(self) -> float | None:
        """Since when it has run nothing (no job running, none started since), else None."""
        if self.closed or any(job.running for job in list(self._jobs.values())):
            return None
        idle = self._last_used
        return idle if time.monotonic() - idle >= RECLAIM_AFTER else None

    def reclaim(self) -> bool:
        """End it when every cgroup slot is taken and it runs nothing; its session starts a
        new sandbox at its next command (files in /tmp are gone, the workspace stays)."""
        with self._state_lock:
            if self.idle_since() is None:
                return False
            self.closed = True
        self._end()
        return True

    def close(self) -> None:
        """End the sandbox and every process in it."""
        with self._state_lock:
            if self.closed:
                return
            self.closed = True
        self._end()

    def _end(self) -> None:
        with contextlib.suppress(ValueError):
            self.backend.limits.reclaimable.remove(self)
        with contextlib.suppress(OSError):
            self._control.close()
        self._launch.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._launch.proc.wait(5)
        if self._launch.proc.stderr:
            self._launch.proc.stderr.close()
        self._launch.close()
        for job in self._jobs.values():
            if job.running:
                job.error = "the sandbox ended"
                job._exit_event.set()

    # -- plumbing -----------------------------------------------------------------------

    def _send(self, message: dict, fds: list[int]) -> None:
        data = json.dumps(message).encode()
        ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        with self._send_lock:
            try:
                self._control.sendmsg([data], ancillary)
            except OSError as exc:
                raise SandboxError(f"the session's sandbox is gone: {exc}") from exc

    def _read_control(self) -> None:
        while True:
            try:
                data = self._control.recv(65536)
            except OSError:
                data = b""
            if not data:
                self._on_gone()
                return
            message = json.loads(data)
            job = self._jobs.get(message.get("id"))
            if job is None:
                continue
            if message["op"] == "started":
                job.pid = message["pid"]
                job._started_event.set()
            elif message["op"] == "error":
                job.error = message["error"]
                job._started_event.set()
                job._exit_event.set()
            elif message["op"] == "exit":
                job.status = message["status"]
                job.ended = time.monotonic()
                job._exit_event.set()

    def _on_gone(self) -> None:
        for job in self._jobs.values():
            if job.running:
                job.error = "the sandbox ended"
                job._started_event.set()
                job._exit_event.set()

    def _feed_stdin(self, fd: int, data: bytes) -> None:
        def feed() -> None:
            with contextlib.suppress(OSError):
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            os.close(fd)

        if len(data) <= 65536:
            feed()
        else:
            threading.Thread(target=feed, daemon=True).start()

    def _stderr(self) -> str:
        stream = self._launch.proc.stderr
        if stream is None or self._launch.proc.poll() is None:
            return ""
        return stream.read().decode(errors="replace").strip()


def _drain(
    fd: int, buffer: OutputBuffer, exited: threading.Event, settled: threading.Event
) -> None:
    """Read ``fd`` into ``buffer`` to its end; set ``settled`` once everything the command
    wrote is in: at end-of-file, or when the pipe is empty after the command has exited
    (a background child may hold it open for ever; it goes on being read for `take_new`).
    The command writes before it exits, and `exited` is set after that, so an empty pipe
    seen after `exited` holds nothing more of the command's."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    try:
        while True:
            # Wake now and then only while it matters: until the output is settled.
            if settled.is_set():
                timeout_ms = None
            else:
                timeout_ms = int((OUTPUT_GRACE if exited.is_set() else EXIT_CHECK) * 1000)
            if not poller.poll(timeout_ms):
                if exited.is_set() and not poller.poll(0):
                    settled.set()
                continue
            data = os.read(fd, 65536)
            if not data:
                return
            buffer.add(data)
    except OSError:
        return
    finally:
        settled.set()
        os.close(fd)


def _spawner_source() -> bytes:
    return Path(__file__).with_name("spawner.py").read_bytes()


def _interpreter() -> tuple[str, dict[str, str]]:
    """A python3 the sandbox can run: the system's, else this one's installation, read-only."""
    for directory in ("/usr/bin", "/usr/local/bin", "/bin"):
        candidate = os.path.join(directory, "python3")
        if os.access(candidate, os.X_OK):
            return candidate, {}
    # This process's own interpreter, never one found on PATH: a long-lived gateway or
    # exec helper keeps the PATH of whoever started it (a workspace's .venv/bin).
    prefix = os.path.realpath(sys.base_prefix)
    return os.path.realpath(sys.executable), {prefix: prefix}
