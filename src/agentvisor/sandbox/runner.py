"""Running a prepared sandbox command: limits, timeout, output, and cleanup.

Shared by the backends that start a local process (bwrap, local). The whole process
tree is ended when the command ends or times out: the pid namespace does that for
bwrap, the run's cgroup (when there is one) does it for everything.
"""

from __future__ import annotations

import contextlib
import math
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterator, Mapping, Sequence

from .base import EXIT_TIMEOUT, Chunk, Result
from .layout import Layout
from .limits import Cgroup, LimitPlan

# What a captured run keeps of each stream (head and tail): a command printing gigabytes
# must not make the gateway hold gigabytes (results.shape cuts further for the agent).
OUTPUT_LIMIT = 4 * 1024 * 1024

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from .idmap import Staged


class OutputBuffer:
    """Collects a stream, keeping the head and the tail when it grows past ``limit``."""

    def __init__(self, limit: int = OUTPUT_LIMIT) -> None:
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.lock = threading.Lock()
        self.offset = 0  # bytes handed out by `take_new`

    def add(self, data: bytes) -> None:
        with self.lock:
            if len(self.head) < self.limit // 2:
                room = self.limit // 2 - len(self.head)
                self.head += data[:room]
                data = data[room:]
            self.tail += data
            excess = len(self.tail) - self.limit // 2
            if excess > 0:
                del self.tail[:excess]
                self.dropped += excess

    def value(self) -> bytes:
        with self.lock:
            if self.dropped:
                marker = f"\n[... {self.dropped} bytes cut ...]\n".encode()
                return bytes(self.head) + marker + bytes(self.tail)
            return bytes(self.head + self.tail)

    def take_new(self) -> bytes:
        """Output not yet returned by an earlier call (for polling background jobs)."""
        full = self.value()
        with self.lock:
            new, self.offset = full[self.offset :], len(full)
        return new


class Prepared:
    """A command line ready to start, with what it needs: fds to pass, the layout whose
    stand-ins to clean up, the limits, and (bwrap's) gate."""

    def __init__(
        self,
        argv: list[str],
        env: Mapping[str, str],
        layout: Layout | None,
        limits: LimitPlan,
        pass_fds: Sequence[int] = (),
        cwd: str | None = None,
        gate: Gate | None = None,
        staged: Staged | None = None,
        rlimits_set: bool = False,
        views: Staged | None = None,
    ) -> None:
        self.argv = argv
        self.env = env
        self.layout = layout
        self.limits = limits
        self.pass_fds = pass_fds
        self.cwd = cwd
        # Set when the command waits for the go-ahead (bwrap's --block-fd): limits are
        # then applied from outside, and the launch needs no code between fork and exec.
        self.gate = gate
        # Idmapped views bwrap takes mounts from, detached when the sandbox ends (bwrap
        # mounts after its --block-fd wait, and tells nothing when it is done).
        self.staged = staged
        self.rlimits_set = rlimits_set  # by a launcher in argv (LimitPlan.rlimit_argv)
        # Views the argv names that outlive the run (its backend's): held, not released,
        # so they stay attached while the run needs them even if the backend is dropped.
        self.views = views

    def release_staged(self) -> None:
        if self.staged is not None:
            self.staged.release()

    def close_fds(self) -> None:
        """Close the fds handed to the child, once (a number may be reused afterwards)."""
        fds, self.pass_fds = self.pass_fds, ()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)


class Gate:
    """Holds a bwrap sandbox before its command runs, until its limits are in place.

    A preexec function (code between fork and exec) forces a full fork of this process,
    ~2 ms per run; without one, `subprocess` uses vfork. So bwrap is started with
    ``--info-fd`` (it reports its namespace child's pid) and ``--block-fd`` (that child
    waits, after its mount setup, for one byte); meanwhile this process moves both bwrap
    processes into the run's cgroup, sets their rlimits with prlimit(2), and only then
    lets the command start. The block fd is the pipe reopened read-write, so the sandbox
    holds a writer itself: if this process dies first, the command never starts (a
    closed pipe would read as end-of-file, which bwrap takes as the go-ahead).
    """

    def __init__(self) -> None:
        self.info_read, self.info_write = os.pipe()
        block_read, self.go = os.pipe()
        self.block = os.open(f"/proc/self/fd/{block_read}", os.O_RDWR | os.O_CLOEXEC)
        os.close(block_read)
        for fd in (self.info_read, self.info_write, self.go):
            os.set_inheritable(fd, False)

    @property
    def child_fds(self) -> tuple[int, int]:
        """(``--info-fd``, ``--block-fd``), to pass to bwrap."""
        return self.info_write, self.block

    def release(
        self, launcher: int, limits: LimitPlan, cgroup: Cgroup | None, *, rlimits: bool = True
    ) -> int | None:
        """Apply the limits to the sandbox's processes, then let its command run; the
        pid of bwrap's namespace child.

        When bwrap failed before reporting its child, nothing waits for the go-ahead;
        bwrap's own exit status and message tell the caller why."""
        try:
            child = _child_pid(self._read_info())
            if child is None:
                return None
            pidfd = os.pidfd_open(child)
            try:
                limits.apply([launcher, child], cgroup, rlimits=rlimits)
                os.write(self.go, b"1")
            except BaseException:
                try:
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                except ProcessLookupError:
                    return None  # it failed on its own (a mount): bwrap's status says why
                raise
            finally:
                os.close(pidfd)
            return child
        finally:
            self.close()

    def _read_info(self) -> bytes:
        """bwrap's report, to its end: it may write in pieces, and a reader that left
        early would kill it with SIGPIPE."""
        chunks = []
        while chunk := os.read(self.info_read, 4096):
            chunks.append(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        for fd in (self.info_read, self.go):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.info_read = self.go = -1


def _child_pid(info: bytes) -> int | None:
    """The pid in bwrap's ``{"child-pid": N}`` report (json would cost an import here)."""
    _, found, rest = info.partition(b'"child-pid":')
    digits = rest.split(b"}")[0].split(b",")[0].strip()
    return int(digits) if found and digits.isdigit() else None


class Launch:
    """One started sandbox process with its cgroup slot; `close` always cleans up.

    ``stdin``/``stdout``/``stderr`` take `subprocess` values (PIPE, DEVNULL, None to share
    the caller's).
    """

    def __init__(
        self, prepared: Prepared, *, stdin: int | None, stdout: int | None, stderr: int | None
    ) -> None:
        self.prepared = prepared
        self.cgroup: Cgroup | None = None
        self.sandbox_init: int | None = None  # bwrap's namespace child, once known
        self.timed_out = False
        self.start = time.monotonic()
        try:
            self.cgroup = prepared.limits.acquire_cgroup()
            gate = prepared.gate
            preexec = prepared.limits.preexec(self.cgroup) if gate is None else None
            try:
                self.proc = subprocess.Popen(
                    prepared.argv,
                    env=dict(prepared.env),
                    pass_fds=tuple(prepared.pass_fds),
                    stdin=stdin,
                    stdout=stdout,
                    stderr=stderr,
                    preexec_fn=preexec,
                    cwd=prepared.cwd,
                )
            finally:
                prepared.close_fds()  # the child has its copies; ours would only leak
                for fd in getattr(preexec, "fds", ()):
                    os.close(fd)
            if gate is not None:
                try:
                    self.sandbox_init = gate.release(
                        self.proc.pid,
                        prepared.limits,
                        self.cgroup,
                        rlimits=not prepared.rlimits_set,
                    )
                except BaseException:
                    self.kill()
                    self.proc.wait()
                    raise
        except BaseException:
            if prepared.gate is not None:
                prepared.gate.close()
            self.close()
            raise

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGKILL)
        if self.cgroup is not None:
            self.cgroup.kill_all()

    def result(self, code: int, out: bytes, err: bytes) -> Result:
        hit = ("memory",) if self.cgroup is not None and self.cgroup.oom_killed() else ()
        return Result(
            exit_code=EXIT_TIMEOUT if self.timed_out else _status(code),
            stdout=out,
            stderr=err,
            timed_out=self.timed_out,
            duration=time.monotonic() - self.start,
            limits_hit=hit,
        )

    def close(self) -> None:
        self.prepared.close_fds()
        self.prepared.release_staged()
        if self.cgroup is not None:
            self.cgroup.kill_all()
        if self.sandbox_init is not None:
            _reap_adopted(self.sandbox_init)
        if self.cgroup is not None:
            self.cgroup.release()
        if self.prepared.layout is not None:
            self.prepared.layout.cleanup()


def adopt_orphans() -> None:
    """Make this (long-lived) process the reaper of its sandboxes' leftovers.

    bwrap exits as soon as the command does, a moment before its namespace child; that
    child is then orphaned, and a zombie until the host's init reaps it, on init's own
    schedule (seconds, in some containers and VMs). Meanwhile it counts against its cgroup
    slot's pids.max. As a child subreaper this process adopts it and `Launch` reaps it at
    once. Only for agentvisor's own servers: in a program embedding the Python API it
    would make every orphan of that program's other children a zombie of its own."""
    import ctypes

    pr_set_child_subreaper = 36
    with contextlib.suppress(OSError, AttributeError):
        # Failing only means zombies wait for init; slots still skip them (limits.empty).
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


def _reap_adopted(pid: int) -> None:
    """Reap bwrap's namespace child if this process adopted it (see `adopt_orphans`); it
    is exiting already (its parent is gone), so wait a moment at most."""
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # gone already
    try:
        # poll, not select: a busy gateway holds descriptors past select's limit of 1024.
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        poller.poll(1000)
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not ours: init reaps it
    finally:
        os.close(pidfd)


def run(
    prepared: Prepared, *, timeout: float, stdin: bytes | None = None, capture: bool = True
) -> Result:
    pipe = subprocess.PIPE if capture else None
    # Captured runs get no terminal input; pass-through runs share the caller's.
    stdin_mode = subprocess.PIPE if stdin is not None else (subprocess.DEVNULL if capture else None)
    launch = Launch(prepared, stdin=stdin_mode, stdout=pipe, stderr=pipe)
    try:
        output = {"stdout": OutputBuffer(), "stderr": OutputBuffer()}
        try:
            for name, data in _pump(launch, timeout, stdin or b""):
                output[name].add(data)
        except BaseException:
            launch.kill()
            launch.proc.wait()
            raise
        return launch.result(launch.proc.wait(), output["stdout"].value(), output["stderr"].value())
    finally:
        launch.close()


def run_attached(
    prepared: Prepared, *, timeout: float, stdio: Sequence[int], cancel_fd: int | None
) -> Result:
    """Run with someone else's stdin/stdout/stderr (fds received from a client) and end
    the sandbox early when ``cancel_fd`` becomes readable (the client asked, or left)."""
    launch = Launch(prepared, stdin=stdio[0], stdout=stdio[1], stderr=stdio[2])
    try:
        for _ in _pump(launch, timeout, cancel_fd=cancel_fd):
            pass  # no pipes of ours: it only waits
        return launch.result(launch.proc.wait(), b"", b"")
    finally:
        launch.close()


def stream(prepared: Prepared, *, timeout: float) -> Iterator[Chunk]:
    """Yield output as it comes; the last chunk (stream "exit") carries the `Result`."""
    launch = Launch(
        prepared, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        for name, data in _pump(launch, timeout):
            yield Chunk(stream=name, data=data)
        code = launch.proc.wait()
        yield Chunk(stream="exit", result=launch.result(code, b"", b""))
    except BaseException:
        launch.kill()
        launch.proc.wait()
        raise
    finally:
        launch.close()


def _pump(
    launch: Launch, timeout: float, data: bytes = b"", cancel_fd: int | None = None
) -> Iterator[tuple[str, bytes]]:
    """Feed ``data`` to the command's stdin pipe and yield ("stdout" | "stderr", bytes)
    from its output pipes as it comes, until it has ended and its pipes are closed.

    At the timeout, or when ``cancel_fd`` becomes readable, the sandbox is killed (the
    output it already wrote is kept; `Launch.timed_out` tells a timeout). The exit is
    watched through a pidfd in the same poll set: `Popen.communicate` waits for it with
    a sleep-and-poll loop whose naps cost milliseconds per run.
    """
    proc = launch.proc
    deadline = launch.start + timeout
    pidfd = os.pidfd_open(proc.pid)
    names = {pidfd: "exit"}
    for name, pipe in (("stdin", proc.stdin), ("stdout", proc.stdout), ("stderr", proc.stderr)):
        if pipe is not None:
            names[pipe.fileno()] = name
    if cancel_fd is not None:
        names[cancel_fd] = "cancel"
    poller = select.poll()
    for fd, name in names.items():
        poller.register(fd, select.POLLOUT if name == "stdin" else select.POLLIN)
    waiting = {fd for fd, name in names.items() if name != "cancel"}
    sent = 0
    try:
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0 and not launch.timed_out:
                launch.timed_out = True
                launch.kill()
            for fd, _ in poller.poll(None if launch.timed_out else math.ceil(remaining * 1000)):
                name = names[fd]
                if name in ("stdout", "stderr"):
                    chunk = os.read(fd, 65536)
                    if chunk:
                        yield name, chunk
                        continue
                elif name == "stdin":
                    # POLLOUT promises room for PIPE_BUF bytes, so this write cannot block.
                    with contextlib.suppress(BrokenPipeError):
                        sent += os.write(fd, data[sent : sent + select.PIPE_BUF])
                        if sent < len(data):
                            continue
                    proc.stdin.close()  # type: ignore[union-attr]
                elif name == "cancel":
                    launch.kill()
                poller.unregister(fd)
                waiting.discard(fd)
    finally:
        os.close(pidfd)
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def _status(code: int) -> int:
    """Shell convention: a command ended by signal N exits with 128 + N."""
    return 128 - code if code < 0 else code
