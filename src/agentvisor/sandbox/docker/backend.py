"""The docker backend: each command in a hardened container, through the Engine API.

A run without a session gets a fresh container: created, started, checked (every limit
and every security setting, see ``verify.py``), then the command is started in
it with ``exec``, and the container is removed when the command ends, so nothing the
command left behind keeps running. With ``sandbox.persistent`` and a session, the
session keeps one container (named after the workspace, the session and the user) whose
files and background processes survive between commands; its labels carry a hash of
every setting that shapes it, and a container whose hash differs is replaced, with a
notice that its background processes end.

The shape of the container is a pure function of the config (``spec.py``), the
extra options are vetted (``options.py``), and the seccomp profile is stricter
than Docker's default (``seccomp.py``). The engine is reached with the Docker SDK
for Python (``DOCKER_HOST`` and friends apply); images are never pulled.

Notices that arise while running (a replaced container, a limit running unenforced by
permission) come before the command's own output on its stderr (captured, or the
caller's). Commands are started by a hand-written exec request on the engine's Unix
socket, so output printed at once is never lost in an HTTP library's read-ahead.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import select
import shutil
import socket
import stat
import struct
import tempfile
import threading
import time
from collections.abc import Generator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ... import paths, protected
from ...config import SandboxConfig
from ...errors import ConfigError, LimitNotEnforced, SandboxError, SandboxUnavailable
from ...protected import parse_mount
from ...records import Declared, Default, replace
from ..base import EXIT_TIMEOUT, Attachment, Chunk, Result
from ..idmap import Staged
from ..layout import Layout
from ..runner import OutputBuffer
from .image import inspect_image
from .options import ExtraOptions, parse_extra_args
from .spec import (
    LABEL,
    Bind,
    ContainerPlan,
    build_plan,
    create_request,
    docker_run_argv,
    plan_hashes,
    resolve_user,
)
from .verify import KernelView, check_container, host_has_swap, read_kernel_view

if TYPE_CHECKING:
    import docker

    from ..persistent import PersistentSandbox

log = logging.getLogger("agentvisor.sandbox.docker")

# The engine's own sockets and state: mounting any of them hands over the host.
ENGINE_PATHS = (
    "/var/run/docker.sock",
    "/run/docker.sock",
    "/run/docker",
    "/var/run/docker",
    "/run/containerd",
    "/var/run/containerd",
)
API_TIMEOUT = 60
EXIT_KILLED = 128 + 9  # what a SIGKILLed command reports, as under bwrap
_STREAMS = {1: "stdout", 2: "stderr"}


class _Io(Declared):
    """Where one command's input comes from, and when it must end."""

    start: float
    deadline: float
    stdin: bytes | None = None
    stdin_fd: int | None = None
    cancel_fd: int | None = None


class _Cancelled(Exception):
    pass


class _Box(Declared, frozen=False):
    """One started, checked container and what the run needs to know about it."""

    id: str
    plan: ContainerPlan
    view: KernelView | None
    staging: Path | None = None
    notices: list[str] = Default(factory=list)


class DockerBackend:
    name = "docker"
    # A session keeps its container through for_session instead (sandbox.persistent).
    persistent_sessions = False

    def __init__(
        self,
        cfg: SandboxConfig,
        workspace: Path,
        env: Mapping[str, str],
        home: Path,
        *,
        session: str | None = None,
        client: docker.APIClient | None = None,
    ) -> None:
        self.cfg = cfg
        self.env = dict(env)
        self.home = home
        self.session = session
        self.persistent = cfg.persistent and session is not None
        self.warnings: list[str] = []
        self.user = resolve_user(cfg.docker.user, Path(os.path.realpath(workspace)))
        self.extra: ExtraOptions = parse_extra_args(
            cfg.docker.extra_args, uid=int(self.user.split(":")[0])
        )
        guarded = [*cfg.protected_paths, *ENGINE_PATHS, *[p for p in (_engine_socket_path(),) if p]]
        _vet_extra_mounts(self.extra, guarded)
        layout_cfg = cfg.model_copy(
            update={
                "protected_paths": guarded,
                "mounts": [*cfg.mounts, *(spec for _, spec in self.extra.mounts)],
            }
        )
        self.layout = Layout.for_config(layout_cfg, workspace, home)
        self.mechanisms = _mechanisms(cfg)
        if cfg.disk_mb is not None:
            self._refuse_disk_quota()
        self._api = client
        self._image_id: str | None = None
        self._lock = threading.Lock()

    def _refuse_disk_quota(self) -> None:
        # Neither the bind-mounted workspace nor the scratch tmpfs share one budget here
        # (sandbox.docker.disk_mb bounds the writable layer only).
        line = (
            "sandbox.disk_mb: cannot be enforced here: the docker backend has no total "
            "write quota (sandbox.docker.disk_mb bounds the image's writable layer)"
        )
        if not self.cfg.allow_unenforced_limits:
            raise LimitNotEnforced(
                f"{line} (set sandbox.allow_unenforced_limits: true to run anyway)"
            )
        self.warnings.append(f"{line} (running anyway: sandbox.allow_unenforced_limits is true)")

    # -- the Backend protocol -------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        attachment: Attachment | None = None,
        capture: bool = True,
    ) -> Result:
        if not capture:  # this process's own terminal
            return self.run_attached(
                argv,
                stdio=(0, 1, 2),
                cancel_fd=None,
                cwd=cwd,
                timeout=timeout,
                attachment=attachment,
            )
        output = {"stdout": OutputBuffer(), "stderr": OutputBuffer()}
        result: Result | None = None
        with contextlib.closing(self._run(argv, cwd, timeout, attachment, stdin=stdin)) as run:
            for chunk in run:
                if chunk.result is not None:
                    result = chunk.result
                else:
                    output[chunk.stream].add(chunk.data)
        assert result is not None
        captured: Result = replace(
            result, stdout=output["stdout"].value(), stderr=output["stderr"].value()
        )
        return captured

    def run_attached(
        self,
        argv: Sequence[str],
        *,
        stdio: Sequence[int],
        cancel_fd: int | None,
        cwd: Path | None = None,
        timeout: float | None = None,
        attachment: Attachment | None = None,
    ) -> Result:
        """Run with the given stdin/stdout/stderr fds (a caller's terminal, possibly
        received by the gateway's exec server); end early when ``cancel_fd`` is readable."""
        result: Result | None = None
        sink = _Sink(stdout=stdio[1], stderr=stdio[2])
        # closing(): the container goes at once, also when writing to the caller fails.
        with contextlib.closing(
            self._run(argv, cwd, timeout, attachment, stdin_fd=stdio[0], cancel_fd=cancel_fd)
        ) as run:
            for chunk in run:
                if chunk.result is not None:
                    result = chunk.result
                else:
                    sink.write(chunk.stream, chunk.data)
        assert result is not None
        return result

    def stream(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        attachment: Attachment | None = None,
    ) -> Iterator[Chunk]:
        return self._run(argv, cwd, timeout, attachment)

    def dry_run(self, argv: Sequence[str], cwd: Path | None = None) -> list[str]:
        """The ``docker run`` command line equivalent to a fresh-container run."""
        self.layout.make_placeholders()
        try:
            plan = self._plan([])
        finally:
            self.layout.cleanup()
        return docker_run_argv(plan, list(argv), str(cwd or self.layout.workspace), self.env)

    def for_session(self, session: str) -> DockerBackend:
        """The same backend for one gateway session: with ``sandbox.persistent``, the
        session keeps one container until `close` (or a change of its settings)."""
        return DockerBackend(
            self.cfg, self.layout.workspace, self.env, self.home, session=session, client=self._api
        )

    def open_persistent(self, attachment: Attachment | None = None) -> PersistentSandbox:
        raise SandboxUnavailable(
            "the docker backend keeps a session's container through for_session instead"
        )

    def close(self) -> None:
        """End the session's persistent container (its background processes end too)."""
        if self.persistent:
            with contextlib.suppress(SandboxUnavailable):
                self._remove(self._container_name())
        self.layout.cleanup()

    # -- one run --------------------------------------------------------------------------

    def _run(
        self,
        argv: Sequence[str],
        cwd: Path | None,
        timeout: float | None,
        attachment: Attachment | None,
        *,
        stdin: bytes | None = None,
        stdin_fd: int | None = None,
        cancel_fd: int | None = None,
    ) -> Generator[Chunk, None, None]:
        attachment = attachment or Attachment()
        timeout = timeout or self.cfg.timeout
        start = time.monotonic()
        try:
            box = self._acquire(attachment)
        except BaseException:
            if not self.persistent:
                self.layout.cleanup()
            raise
        try:
            if box.notices:
                text = "".join(f"agentvisor: {n}\n" for n in box.notices).encode()
                yield Chunk(stream="stderr", data=text)
            env = {**self.env, **attachment.env}
            command = [*attachment.argv_prefix, *argv]
            yield from self._exec(
                box,
                command,
                str(cwd or self.layout.workspace),
                env,
                _Io(start, start + timeout, stdin, stdin_fd, cancel_fd),
            )
        finally:
            # A session's container keeps its read-only stand-ins bound until `close`:
            # removing one under a live bind would let the path be created afresh.
            if not self.persistent:
                self._remove(box.id)
                self.layout.cleanup()
                if box.staging is not None:
                    shutil.rmtree(box.staging, ignore_errors=True)

    def _exec(
        self, box: _Box, command: list[str], cwd: str, env: dict[str, str], io: _Io
    ) -> Iterator[Chunk]:
        api = self._engine()
        oom_before = box.view.oom_kills() if box.view else 0
        try:
            exec_id = api.exec_create(
                box.id,
                command,
                stdout=True,
                stderr=True,
                stdin=io.stdin is not None or io.stdin_fd is not None,
                tty=False,
                environment=env,
                workdir=cwd,
                user=box.plan.user,
            )["Id"]
            sock, early = self._start_exec(exec_id)
        except _api_errors(OSError) as exc:
            raise self._stopped(box.id) or SandboxError(
                f"the engine could not start the command: {_explain(exc)}"
            ) from exc
        done = threading.Event()
        if io.stdin is not None:
            threading.Thread(target=_feed, args=(sock, io.stdin), daemon=True).start()
        elif io.stdin_fd is not None:
            threading.Thread(target=_pump, args=(io.stdin_fd, sock, done), daemon=True).start()
        ended = None  # "timeout" or "cancel" when agentvisor ended the command
        try:
            for stream, data in _frames(sock, early, io.deadline, io.cancel_fd):
                yield Chunk(stream=stream, data=data)
        except (TimeoutError, _Cancelled) as exc:
            ended = "timeout" if isinstance(exc, TimeoutError) else "cancel"
            notice = self._end_early(box, ended)
            if notice:
                yield Chunk(stream="stderr", data=f"agentvisor: {notice}\n".encode())
        finally:
            done.set()
            with contextlib.suppress(OSError):
                sock.close()
        code = {"timeout": EXIT_TIMEOUT, "cancel": EXIT_KILLED}.get(ended or "") or self._exit_code(
            exec_id
        )
        hit = ("memory",) if box.view and box.view.oom_kills() > oom_before else ()
        yield Chunk(
            stream="exit",
            result=Result(
                exit_code=code,
                stdout=b"",
                stderr=b"",
                timed_out=ended == "timeout",
                duration=time.monotonic() - io.start,
                limits_hit=hit,
            ),
        )

    def _start_exec(self, exec_id: str) -> tuple[socket.socket, bytes]:
        """Start an exec and take over its connection: (socket, stream bytes already read).

        On a Unix socket the request is written by hand, so nothing the command prints
        right away can be lost in an HTTP library's read-ahead buffer. Other transports
        (tcp, ssh) go through the SDK.
        """
        path = _engine_socket_path()
        if path is None:
            raw: Any = self._engine().exec_start(exec_id, socket=True)
            sock: socket.socket = getattr(raw, "_sock", raw)
            return sock, b""
        body = b'{"Detach":false,"Tty":false}'
        request = (
            f"POST /v{self._engine().api_version}/exec/{exec_id}/start HTTP/1.1\r\n"
            "Host: docker\r\nContent-Type: application/json\r\n"
            "Connection: Upgrade\r\nUpgrade: tcp\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(API_TIMEOUT)
            sock.connect(path)
            sock.sendall(request)
            head = b""
            while b"\r\n\r\n" not in head:
                data = sock.recv(65536)
                if not data:
                    raise OSError("the engine closed the connection")
                head += data
            head, _, early = head.partition(b"\r\n\r\n")
            status = head.split(b"\r\n", 1)[0].decode(errors="replace")
            if status.split(" ")[1:2] not in (["101"], ["200"]):
                raise OSError(f"{status}: {early[:300].decode(errors='replace').strip()}")
            sock.settimeout(None)
            return sock, early
        except BaseException:
            sock.close()
            raise

    def _exit_code(self, exec_id: str) -> int:
        api = self._engine()
        for _ in range(200):  # the stream ends a moment before the engine records the exit
            info = api.exec_inspect(exec_id)
            if not info.get("Running") and info.get("ExitCode") is not None:
                return int(info["ExitCode"])
            time.sleep(0.005)
        raise SandboxError("the engine did not report the command's exit status")

    def _end_early(self, box: _Box, why: str) -> str | None:
        """Kill every process of the container; a persistent one restarts on the next run."""
        with contextlib.suppress(*_api_errors()):
            self._engine().kill(box.id)
        if not self.persistent:
            return None
        what = "the timeout" if why == "timeout" else "cancelling"
        return self._notify(
            f"{what} ended the command and every process in this "
            "session's container, background processes included; the next "
            "command restarts the container"
        )

    # -- containers -----------------------------------------------------------------------

    def _acquire(self, attachment: Attachment) -> _Box:
        with self._lock:
            self.layout.make_placeholders()
            binds, staging = self._attachment_binds(attachment)
            try:
                plan = self._plan(binds)
                hashes = plan_hashes(plan, self._image())
                notices: list[str] = []
                box = self._reuse(plan, hashes, notices) if self.persistent else None
                if box is None:
                    name = self._container_name() if self.persistent else None
                    box = self._create(plan, hashes, name, notices)
            except BaseException:
                if staging is not None and not self.persistent:
                    shutil.rmtree(staging, ignore_errors=True)
                raise
            box.staging = staging
            return box

    def _plan(self, attachment_binds: list[Bind]) -> ContainerPlan:
        return build_plan(
            self.cfg,
            self.layout,
            self.extra,
            image=self.cfg.docker.image,
            user=self.user,
            home=str(self.home),
            attachment_binds=attachment_binds,
        )

    def _reuse(
        self, plan: ContainerPlan, hashes: dict[str, str], notices: list[str]
    ) -> _Box | None:
        api = self._engine()
        name = self._container_name()
        try:
            info = api.inspect_container(name)
        except _not_found():
            return None
        labels = info["Config"].get("Labels") or {}
        if labels.get(f"{LABEL}.hash") == hashes["all"]:
            if not info["State"]["Running"]:
                api.start(info["Id"])
            box = self._verify(info["Id"], plan, [], notices)
            box.notices = notices
            return box
        changed = [
            area
            for area, value in hashes.items()
            if area != "all" and labels.get(f"{LABEL}.hash.{area}") != value
        ]
        notices.append(
            self._notify(
                f"this session's container was replaced because its settings changed "
                f"({', '.join(changed) or 'unknown'}); processes still running in it, background "
                "processes included, have ended"
            )
        )
        self._remove(info["Id"])
        return None

    def _create(
        self, plan: ContainerPlan, hashes: dict[str, str], name: str | None, notices: list[str]
    ) -> _Box:
        staged = self._stage(plan)
        try:
            return self._create_staged(plan, hashes, name, notices, staged.paths)
        finally:
            # The started container holds its own copies of its mounts.
            staged.release()

    def _stage(self, plan: ContainerPlan) -> Staged:
        """Idmapped views of the writable directories that a root caller's unprivileged
        container user does not own (see sandbox/idmap.py), so it can write there."""
        staged = Staged()
        if os.getuid() != 0:
            return staged
        uid, gid = (int(n) for n in self.user.split(":"))
        writable = [str(self.layout.workspace)]
        writable += [str(m.host) for m in self.layout.mounts if m.writable]
        try:
            for source in writable:
                if os.stat(source).st_uid != uid:
                    staged.add(source, (uid, gid))
        except BaseException:
            staged.release()
            raise
        return staged

    def _create_staged(
        self,
        plan: ContainerPlan,
        hashes: dict[str, str],
        name: str | None,
        notices: list[str],
        sources: dict[str, str],
    ) -> _Box:
        api = self._engine()
        request = create_request(plan, sources=sources)
        request["labels"].update(
            {
                f"{LABEL}.managed": "1",
                f"{LABEL}.hash": hashes["all"],
                f"{LABEL}.session": self.session or "",
                f"{LABEL}.workspace": str(self.layout.workspace),
                **{
                    f"{LABEL}.hash.{area}": value for area, value in hashes.items() if area != "all"
                },
            }
        )
        try:
            created = api.create_container(name=name, **request)
        except _api_errors() as exc:
            if plan.disk_mb is not None and "storage" in _explain(exc).lower():
                return self._create_without_disk_quota(plan, hashes, name, notices, exc)
            if name is not None and getattr(exc, "status_code", None) == 409:
                # Another agentvisor process created the session's container just now.
                info = api.inspect_container(name)
                return self._verify(info["Id"], plan, [], notices)
            raise SandboxError(f"the engine refused the container: {_explain(exc)}") from exc
        try:
            api.start(created["Id"])
        except _api_errors() as exc:
            self._remove(created["Id"])
            raise SandboxError(
                f"the container did not start: {_explain(exc)} (the image "
                "needs /bin/sh and sleep; see docs/docker.md)"
            ) from exc
        box = self._verify(created["Id"], plan, created.get("Warnings") or [], notices)
        box.notices = notices
        return box

    def _create_without_disk_quota(
        self,
        plan: ContainerPlan,
        hashes: dict[str, str],
        name: str | None,
        notices: list[str],
        exc: Exception,
    ) -> _Box:
        line = (
            f"sandbox.docker.disk_mb: cannot be enforced here: the engine refused it "
            f"({_explain(exc)})"
        )
        if not self.cfg.allow_unenforced_limits:
            raise LimitNotEnforced(
                line + "; set sandbox.allow_unenforced_limits: true to run without it"
            ) from exc
        notices.append(
            self._notify(line + " (running anyway: sandbox.allow_unenforced_limits is true)")
        )
        return self._create(replace(plan, disk_mb=None), hashes, name, notices)

    def _verify(
        self, container_id: str, plan: ContainerPlan, warnings: list[str], notices: list[str]
    ) -> _Box:
        """Check the running container; remove it and refuse when something is missing."""
        api = self._engine()
        info = api.inspect_container(container_id)
        stopped = self._stopped(container_id, info)
        if stopped is not None:
            self._remove(container_id)
            raise stopped
        view = read_kernel_view(info["State"]["Pid"], info["Id"])
        found = check_container(plan, info, warnings, view, swap_on_host=host_has_swap())
        if found.violations:
            self._remove(container_id)
            raise SandboxError(
                "the engine did not apply agentvisor's isolation: " + "; ".join(found.violations)
            )
        if found.unenforced:
            lines = [
                f"{key}: not enforced: {'; '.join(why)}" for key, why in found.unenforced.items()
            ]
            if not self.cfg.allow_unenforced_limits:
                self._remove(container_id)
                raise LimitNotEnforced(
                    "; ".join(lines) + " (set sandbox.allow_unenforced_limits: true to run anyway)"
                )
            notices += [
                self._notify(line + " (running anyway: sandbox.allow_unenforced_limits is true)")
                for line in lines
            ]
        return _Box(id=info["Id"], plan=plan, view=view)

    def _stopped(
        self, container_id: str, info: dict[str, Any] | None = None
    ) -> SandboxError | None:
        """The error to give when the container is no longer running, else None."""
        api = self._engine()
        with contextlib.suppress(*_api_errors()):
            info = info or api.inspect_container(container_id)
            if not info["State"]["Running"]:
                logs = api.logs(container_id, tail=5).decode(errors="replace").strip()
                return SandboxError(
                    f"the container stopped at once (exit "
                    f"{info['State']['ExitCode']}{': ' + logs if logs else ''})"
                    "; the image needs /bin/sh and sleep (docs/docker.md)"
                )
        return None

    def _remove(self, container: str) -> None:
        with contextlib.suppress(*_api_errors()):
            self._engine().remove_container(container, force=True, v=True)

    def _container_name(self) -> str:
        key = f"{self.layout.workspace}\0{self.session}\0{self.user}"
        return "agentvisor-" + hashlib.sha256(key.encode()).hexdigest()[:16]

    def _notify(self, text: str) -> str:
        log.warning("%s", text)
        return text

    # -- attachments ----------------------------------------------------------------------

    def _staging_dir(self) -> Path:
        """Where attachment files are placed on the host to be bound in read-only."""
        if self.persistent:
            directory = paths.cache_dir() / "docker" / self._container_name()
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            return directory
        return Path(tempfile.mkdtemp(prefix="agentvisor-docker-"))

    def _attachment_binds(self, attachment: Attachment) -> tuple[list[Bind], Path | None]:
        uid, gid = (int(part) for part in self.user.split(":"))
        binds = []
        for host, inside in attachment.binds.items():
            _grant_socket(host, uid, gid)
            binds.append(Bind(host, inside, False))
        binds += [Bind(host, inside, True) for host, inside in attachment.ro_binds.items()]
        staging = self._staging_dir() if attachment.ro_data else None
        for inside, data in attachment.ro_data.items():
            assert staging is not None
            # Named by content, so a persistent container's hash changes only with it.
            target = staging / hashlib.sha256(data).hexdigest()[:24]
            if not target.exists():
                target.write_bytes(data)
                target.chmod(0o444)
            binds.append(Bind(str(target), inside, True))
        return binds, staging

    # -- the engine -----------------------------------------------------------------------

    def _engine(self) -> docker.APIClient:
        if self._api is None:
            try:
                from docker.utils import kwargs_from_env

                import docker

                api = docker.APIClient(timeout=API_TIMEOUT, **kwargs_from_env())
                api.ping()
            except Exception as exc:  # the SDK raises several unrelated types here
                raise SandboxUnavailable(
                    f"cannot reach the Docker engine ({exc}); start it (for example "
                    "scripts/docker-start.sh) or point DOCKER_HOST at it"
                ) from exc
            self._api = api
        return self._api

    def _image(self) -> str:
        if self._image_id is None:
            name = self.cfg.docker.image
            try:
                self._image_id = str(inspect_image(self._engine(), name)["Id"])
            except _not_found() as exc:
                raise SandboxUnavailable(
                    f"the image {name} is not on this machine, and agentvisor never pulls "
                    "images: build the default one with scripts/docker-build-image.sh, or "
                    "pull or build one yourself and name it in sandbox.docker.image "
                    "(docs/docker.md)"
                ) from exc
        return self._image_id


def _mechanisms(cfg: SandboxConfig) -> dict[str, str]:
    checked = "checked on the running container before each command"
    out = {
        "memory_mb": f"container memory limit, swap included (cgroup); {checked}",
        "pids": f"container pids limit (cgroup); {checked}",
        "docker.cpus": f"container CPU quota (cgroup); {checked}",
        "tmp_size_mb": f"tmpfs size of /tmp, /var/tmp, /run, /dev/shm and home; {checked}",
        "file_size_mb": f"RLIMIT_FSIZE (container ulimit); {checked}",
        "timeout": "wall-clock timer (kills every process in the container)",
    }
    if cfg.cpu_seconds is not None:
        out["cpu_seconds"] = f"RLIMIT_CPU (container ulimit); {checked}"
    if cfg.docker.disk_mb is not None:
        out["docker.disk_mb"] = "size of the container's writable layer (storage driver quota)"
    return out


def _engine_socket_path() -> str | None:
    """The engine's Unix socket, or None when DOCKER_HOST names another transport."""
    host = os.environ.get("DOCKER_HOST", "")
    if not host:
        return "/var/run/docker.sock"
    return host.removeprefix("unix://") if host.startswith("unix://") else None


def _vet_extra_mounts(extra: ExtraOptions, guarded: list[str]) -> None:
    """Refuse an extra mount of a protected path, naming the extra_args entry."""
    protected_real = [Path(os.path.realpath(p)) for p in protected.protected_paths(guarded)]
    for index, spec in extra.mounts:
        where = f"sandbox.docker.extra_args[{index}]"
        try:
            mount = parse_mount(spec)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        real = Path(os.path.realpath(mount.host))
        for path in protected_real:
            if real == path or path in real.parents:
                raise ConfigError(
                    f"{where}: mounting {mount.host} refused: it is inside the "
                    f"protected path {path} (the Docker socket and agentvisor's "
                    "own files are among them)"
                )


def _grant_socket(path: str, uid: int, gid: int) -> None:
    """Let the sandbox user connect to a bound Unix socket (e.g. the egress proxy's)."""
    try:
        info = os.stat(path)
    except OSError as exc:
        raise SandboxError(f"attachment {path}: {exc.strerror}") from exc
    if not stat.S_ISSOCK(info.st_mode) or info.st_uid == uid or info.st_mode & 0o002:
        return
    parent = os.stat(os.path.dirname(path))
    # Only a socket in a private directory may be handed over: nobody else on the host
    # can reach it, and inside it is visible to the sandbox alone.
    if os.getuid() == 0 and parent.st_mode & 0o077 == 0:
        os.chown(path, uid, gid)
        return
    raise SandboxError(
        f"the sandbox user {uid} cannot connect to {path} (owned by uid "
        f"{info.st_uid}); run agentvisor as that user or set sandbox.docker.user"
    )


def _frames(
    sock: socket.socket, early: bytes, deadline: float, cancel_fd: int | None
) -> Iterator[tuple[str, bytes]]:
    """Demultiplex the engine's attach stream (8-byte headers) until it ends."""
    buffer = bytearray(early)
    watch: list[socket.socket | int] = [sock] if cancel_fd is None else [sock, cancel_fd]
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        ready, _, _ = select.select(watch, [], [], remaining)
        if cancel_fd is not None and cancel_fd in ready:
            raise _Cancelled
        if not ready:
            continue
        data = sock.recv(1 << 16)
        if not data:
            return
        buffer += data
        while len(buffer) >= 8:
            kind, size = struct.unpack(">BxxxL", buffer[:8])
            if len(buffer) < 8 + size:
                break
            payload = bytes(buffer[8 : 8 + size])
            del buffer[: 8 + size]
            if payload:
                yield _STREAMS.get(kind, "stdout"), payload


def _feed(sock: socket.socket, data: bytes) -> None:
    with contextlib.suppress(OSError):
        sock.sendall(data)
        sock.shutdown(socket.SHUT_WR)


def _pump(fd: int, sock: socket.socket, done: threading.Event) -> None:
    """Copy a caller's stdin to the command until it ends, or the command does."""
    with contextlib.suppress(OSError):
        while not done.is_set():
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                continue
            data = os.read(fd, 1 << 16)
            if not data:
                sock.shutdown(socket.SHUT_WR)
                return
            sock.sendall(data)


class _Sink:
    """Writes output to a caller's fds; a caller that went away just stops receiving."""

    def __init__(self, *, stdout: int, stderr: int) -> None:
        self.fds = {"stdout": stdout, "stderr": stderr}
        self.gone: set[int] = set()

    def write(self, stream: str, data: bytes) -> None:
        fd = self.fds[stream]
        view = memoryview(data)
        while view and fd not in self.gone:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:  # a non-blocking pipe that is full: wait for room
                select.select([], [fd], [], 1.0)
            except OSError:
                self.gone.add(fd)


def _api_errors(*more: type[Exception]) -> tuple[type[Exception], ...]:
    import docker.errors
    import requests

    return (docker.errors.DockerException, requests.RequestException, *more)


def _not_found() -> type[Exception]:
    import docker.errors

    return docker.errors.NotFound


def _explain(exc: BaseException) -> str:
    return str(getattr(exc, "explanation", None) or exc)
