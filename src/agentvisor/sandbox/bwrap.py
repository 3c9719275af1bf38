"""The bubblewrap backend: Linux namespaces, no capabilities, seccomp, no network.

`build_argv` is a pure function from a `BwrapPlan` to the bwrap command line, so the
exact sandbox can be printed (``agentvisor exec --dry-run``) and tested without a
kernel. `BwrapBackend` runs it: clean environment for bwrap itself (its pid 1 inside
must not carry the caller's secrets either), a cgroup and rlimits from the limit plan,
the seccomp program on a memfd, and a timer that kills the whole sandbox.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ..errors import SandboxUnavailable
from ..records import Declared, Default
from . import runner
from .base import Attachment, Chunk, Result
from .layout import SYSTEM_BINDS, Layout
from .limits import LimitPlan

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from ..config import SandboxConfig
    from .persistent import PersistentSandbox

MIB = 1024 * 1024


class BwrapPlan(Declared):
    """Everything that shapes one sandbox, as plain values."""

    layout: Layout
    home: Path
    tmp_size_mb: int
    cwd: Path
    seccomp_fd: int | None
    attachment: Attachment = Default(factory=Attachment)
    data_fds: Mapping[str, int] = Default(factory=dict)  # inside path -> fd
    # A sandbox that outlives the call (a session's) cannot use --die-with-parent: the
    # kernel ties that signal to the *thread* that started bwrap. Its command runs as pid 1
    # instead, so the whole sandbox ends when that command (the spawner) exits.
    command_is_init: bool = False
    # (--info-fd, --block-fd): the command waits until its limits are applied (runner.Gate).
    gate_fds: tuple[int, int] | None = None


def build_argv(plan: BwrapPlan, argv: Sequence[str], bwrap: str = "bwrap") -> list[str]:
    size = str(plan.tmp_size_mb * MIB)
    out = [
        bwrap,
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        "--unshare-cgroup-try",
        "--unshare-net",
        "--hostname",
        "agentvisor",
        "--cap-drop",
        "ALL",
        "--new-session",
    ]
    out.append("--as-pid-1" if plan.command_is_init else "--die-with-parent")
    for directory in SYSTEM_BINDS:
        if os.path.islink(directory):
            out += ["--symlink", os.readlink(directory), directory]
        elif os.path.isdir(directory):
            out += ["--ro-bind", directory, directory]
    out += ["--proc", "/proc", "--dev", "/dev"]
    for scratch in ("/tmp", "/var/tmp", "/run", "/dev/shm", str(plan.home)):
        out += ["--size", size, "--tmpfs", scratch]
    out += ["--symlink", "../run", "/var/run"]
    for mount in plan.layout.mounts:
        out += ["--bind" if mount.writable else "--ro-bind", str(mount.host), str(mount.inside)]
    ws = str(plan.layout.workspace)
    out += ["--bind", ws, ws]
    parents, readonly = plan.layout.readonly_binds()
    for directory in parents:
        out += ["--bind", str(directory), str(directory)]
    for path in readonly:
        out += ["--ro-bind", str(path), str(path)]
    for mask in plan.layout.masks:
        if mask.is_dir:
            spot = str(mask.inside)
            out += ["--perms", "0000", "--tmpfs", spot, "--remount-ro", spot]
        else:
            out += ["--ro-bind", "/dev/null", str(mask.inside)]
    for host, inside in plan.attachment.binds.items():
        out += ["--bind", host, inside]
    for host, inside in plan.attachment.ro_binds.items():
        out += ["--ro-bind", host, inside]
    for inside, fd in plan.data_fds.items():
        out += ["--ro-bind-data", str(fd), inside]
    # bwrap's root is a writable tmpfs; nothing but the mounts above may be written.
    out += ["--remount-ro", "/"]
    if plan.seccomp_fd is not None:
        out += ["--seccomp", str(plan.seccomp_fd)]
    if plan.gate_fds is not None:
        out += ["--info-fd", str(plan.gate_fds[0]), "--block-fd", str(plan.gate_fds[1])]
    out += ["--chdir", str(plan.cwd), "--"]
    out += [*plan.attachment.argv_prefix, *argv]
    return out


def find_bwrap() -> str:
    # A PATH walk rather than shutil.which: shutil costs milliseconds to import on every exec.
    for directory in os.get_exec_path():
        path = os.path.join(directory, "bwrap")
        if os.access(path, os.X_OK) and os.path.isfile(path):
            return path
    raise SandboxUnavailable(
        "bubblewrap (bwrap) is not installed; run `make install` or "
        "`apt-get install bubblewrap`, or see `agentvisor doctor`"
    )


class BwrapBackend:
    name = "bwrap"
    persistent_sessions = True

    def __init__(
        self,
        cfg: SandboxConfig,
        layout: Layout,
        limits: LimitPlan,
        env: Mapping[str, str],
        home: Path,
    ) -> None:
        self.cfg = cfg
        self.layout = layout
        self.limits = limits
        self.env = dict(env)
        self.home = home
        self.bwrap = find_bwrap()
        from .seccomp import filter_bpf

        self._bpf = filter_bpf()

    def prepare(
        self,
        argv: Sequence[str],
        cwd: Path | None = None,
        attachment: Attachment | None = None,
        inherit_fds: Sequence[int] = (),
        command_is_init: bool = False,
    ) -> runner.Prepared:
        """The full bwrap command for ``argv``; ``inherit_fds`` stay open inside."""
        attachment = attachment or Attachment()
        # Placeholders first: the mount list below depends on what exists.
        self.layout.make_placeholders()
        fds: list[int] = [_memfd("agentvisor-seccomp", self._bpf)]
        data_fds = {}
        for inside, data in attachment.ro_data.items():
            fd = _memfd("agentvisor-data", data)
            fds.append(fd)
            data_fds[inside] = fd
        gate = runner.Gate()
        fds += gate.child_fds
        plan = BwrapPlan(
            layout=self.layout,
            home=self.home,
            tmp_size_mb=self.cfg.tmp_size_mb,
            cwd=cwd or self.layout.workspace,
            seccomp_fd=fds[0],
            attachment=attachment,
            data_fds=data_fds,
            command_is_init=command_is_init,
            gate_fds=gate.child_fds,
        )
        env = {**self.env, **attachment.env}
        return runner.Prepared(
            argv=build_argv(plan, argv, self.bwrap),
            env=env,
            pass_fds=[*fds, *inherit_fds],
            layout=self.layout,
            limits=self.limits,
            gate=gate,
        )

    def dry_run(self, argv: Sequence[str], cwd: Path | None = None) -> list[str]:
        prepared = self.prepare(argv, cwd)
        prepared.close_fds()
        if prepared.gate is not None:
            prepared.gate.close()
        self.layout.cleanup()
        return prepared.argv

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
        prepared = self.prepare(argv, cwd, attachment)
        return runner.run(
            prepared, timeout=timeout or self.cfg.timeout, stdin=stdin, capture=capture
        )

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
        prepared = self.prepare(argv, cwd, attachment)
        return runner.run_attached(
            prepared, timeout=timeout or self.cfg.timeout, stdio=stdio, cancel_fd=cancel_fd
        )

    def stream(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        attachment: Attachment | None = None,
    ) -> Iterator[Chunk]:
        prepared = self.prepare(argv, cwd, attachment)
        return runner.stream(prepared, timeout=timeout or self.cfg.timeout)

    def for_session(self, session: str) -> BwrapBackend:
        return self  # each run is a fresh sandbox; sessions keep theirs via open_persistent

    def open_persistent(self, attachment: Attachment | None = None) -> PersistentSandbox:
        from .persistent import PersistentSandbox

        return PersistentSandbox(self, attachment=attachment)

    def close(self) -> None:
        pass


def _memfd(name: str, data: bytes) -> int:
    fd = os.memfd_create(name, 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
