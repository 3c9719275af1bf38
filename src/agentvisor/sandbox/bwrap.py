"""The bubblewrap backend: Linux namespaces, no capabilities, seccomp, no network.

`build_argv` is a pure function from a `BwrapPlan` to the bwrap command line, so the
exact sandbox can be printed (``agentvisor exec --dry-run``) and tested without a
kernel. `BwrapBackend` runs it: clean environment for bwrap itself (its pid 1 inside
must not carry the caller's secrets either), a cgroup and rlimits from the limit plan,
the seccomp program on a memfd, and a timer that kills the whole sandbox.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from .. import hostprogs
from ..errors import SandboxUnavailable
from ..records import Declared, Default
from . import runner
from .base import Attachment, Chunk, Overlay, Result
from .identity import sandbox_user, switch_argv, view_of
from .layout import SYSTEM_BINDS, Layout
from .limits import LimitPlan, can_prlimit_others

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from ..config import SandboxConfig
    from .idmap import Staged
    from .persistent import PersistentSandbox

MIB = 1024 * 1024
SYSTEM_PYTHON = "/usr/bin/python3"
# How sandbox.disk_mb is shared out among the scratch tmpfs (a mount has one fixed size);
# the workspace's changeset gets the rest (`workspace_quota_bytes`), at least half.
SCRATCH_SHARES = {"/tmp": 0.2, "/var/tmp": 0.05, "/run": 0.05, "/dev/shm": 0.05, "home": 0.15}
# As Docker's defaults: host-global /proc entries read-only, kernel memory and keys hidden.
PROC_READ_ONLY = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs")
PROC_MASKED = ("/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug")


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
    # Host directory -> the idmapped view bwrap takes it from (a root caller's sandbox
    # user writes there as the directory's owner; see identity.py).
    sources: Mapping[str, str] = Default(factory=dict)
    disk_mb: int | None = None  # sandbox.disk_mb: what the scratch tmpfs may hold together


def scratch_sizes(tmp_size_mb: int, disk_mb: int | None, home: Path) -> dict[str, int]:
    """Each scratch tmpfs and its size in bytes: ``tmp_size_mb`` each, or with
    ``disk_mb`` a share of that total (`SCRATCH_SHARES`), so all of them together hold
    no more than it."""
    shares = {**SCRATCH_SHARES, str(home): SCRATCH_SHARES["home"]}
    del shares["home"]
    cap = tmp_size_mb * MIB
    if disk_mb is None:
        return dict.fromkeys(shares, cap)
    return {path: min(cap, int(disk_mb * MIB * share)) for path, share in shares.items()}


def workspace_quota_bytes(tmp_size_mb: int, disk_mb: int, home: Path) -> int:
    """What a session may write to the workspace (its changeset's size): ``disk_mb``
    less what the scratch tmpfs may hold."""
    return disk_mb * MIB - sum(scratch_sizes(tmp_size_mb, disk_mb, home).values())


def build_argv(plan: BwrapPlan, argv: Sequence[str], bwrap: str = "bwrap") -> list[str]:
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
    # Host-global kernel settings are read-only whoever the sandbox runs as (a root
    # caller's /proc/sys/kernel/core_pattern runs a program as root on the host).
    for path in PROC_READ_ONLY:
        out += ["--ro-bind-try", path, path]
    for path in PROC_MASKED:
        if os.path.exists(path):
            out += ["--ro-bind", "/dev/null", path]
    for scratch, size in scratch_sizes(plan.tmp_size_mb, plan.disk_mb, plan.home).items():
        out += ["--size", str(size), "--tmpfs", scratch]
    out += ["--symlink", "../run", "/var/run"]
    for mount in plan.layout.mounts:
        source = _source(plan, str(mount.host))
        out += ["--bind" if mount.writable else "--ro-bind", source, str(mount.inside)]
    ws = str(plan.layout.workspace)
    out += ["--bind", _source(plan, ws), ws]
    for anchor in plan.layout.anchors:
        out += ["--bind", _source(plan, str(anchor.host)), str(anchor.inside)]
    parents, readonly = plan.layout.readonly_binds()
    for directory in parents:
        out += ["--bind", _source(plan, directory), directory]
    for path in readonly:
        out += ["--ro-bind", _source(plan, path), path]
    for mask in plan.layout.masks:
        if mask.is_dir:
            spot = str(mask.inside)
            out += ["--perms", "0000", "--tmpfs", spot, "--remount-ro", spot]
        else:
            out += ["--ro-bind", "/dev/null", str(mask.inside)]
    for host, inside in plan.attachment.binds.items():
        out += ["--bind", _source(plan, host), inside]
    for host, inside in plan.attachment.ro_binds.items():
        out += ["--ro-bind", _source(plan, host), inside]
    for inside, fd in plan.data_fds.items():
        out += ["--ro-bind-data", str(fd), inside]
    # bwrap's root is a writable tmpfs; nothing but the mounts above may be written. So is
    # its /dev, owned by the sandbox's user and of no set size: files there would escape
    # sandbox.disk_mb (the device nodes in it stay usable; /dev/shm is its own mount).
    out += ["--remount-ro", "/dev", "--remount-ro", "/"]
    if plan.seccomp_fd is not None:
        out += ["--seccomp", str(plan.seccomp_fd)]
    if plan.gate_fds is not None:
        out += ["--info-fd", str(plan.gate_fds[0]), "--block-fd", str(plan.gate_fds[1])]
    out += ["--chdir", str(plan.cwd), "--"]
    out += [*plan.attachment.argv_prefix, *argv]
    return out


def _source(plan: BwrapPlan, path: str) -> str:
    return view_of(plan.sources, path)


def overlay_argv(
    overlay: Overlay,
    workspace: Path,
    views: Mapping[str, str] | None = None,
    target: str | None = None,
) -> list[str]:
    """The mount step that puts ``overlay`` over ``workspace`` and then runs bwrap: this
    process's own interpreter, isolated (``-I -S``), on the standalone ``overlay.py``.

    With ``views`` (host path -> idmapped view, for a root caller's sandbox user) the
    layers are read through the views and the overlay is mounted at ``target`` (the
    workspace's own path may be out of that user's reach), and the step runs on the
    system python3 with its source given inline: this process's own installation may be
    unreadable to that user.
    """
    script = Path(__file__).with_name("overlay.py")
    if views is None:
        head = [sys.executable, "-I", "-S", str(script)]
        layers = [str(workspace), overlay.upper, overlay.work, str(overlay.report_fd)]
    else:
        head = [SYSTEM_PYTHON, "-I", "-S", "-c", script.read_text()]
        layers = [
            target or str(workspace),
            view_of(views, overlay.upper),
            view_of(views, overlay.work),
            str(overlay.report_fd),
            view_of(views, str(workspace)),
        ]
    return [*head, *layers, "--"]


def find_bwrap() -> str:
    # In the system directories only, never on the caller's PATH (agentvisor.hostprogs).
    path = hostprogs.find("bwrap")
    if path is not None:
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
        self.user = sandbox_user(layout.workspace)
        self._views: Staged | None = None  # see _workspace_views
        self._views_lock = threading.Lock()
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
        overlay = attachment.overlay
        if overlay is None:
            # Placeholders first: the mount list below depends on what exists.
            self.layout.make_placeholders()
        # Over a changeset nothing is made in the workspace: a read-only path that does
        # not exist yet is held by the changeset's review instead (agentvisor.changes).
        fds: list[int] = [_memfd("agentvisor-seccomp", self._bpf)]
        data_fds = {}
        for inside, data in attachment.ro_data.items():
            fd = _memfd("agentvisor-data", data)
            fds.append(fd)
            data_fds[inside] = fd
        gate = runner.Gate()
        fds += gate.child_fds
        switch = self.user.switches
        staged = self._stage_attachment(attachment) if switch else None
        layer_views = {**self._workspace_views(switch), **(staged.paths if staged else {})}
        views = dict(layer_views)
        mount_point = None
        if overlay is not None:
            # bwrap binds the workspace from the overlay: on the workspace's own path, or
            # for the sandbox user where it can reach it.
            views.pop(str(self.layout.workspace), None)
            if staged is not None:
                mount_point = staged.mount_point("overlay")
                views[str(self.layout.workspace)] = mount_point
        plan = BwrapPlan(
            layout=self.layout,
            home=self.home,
            tmp_size_mb=self.cfg.tmp_size_mb,
            disk_mb=self.cfg.disk_mb,
            cwd=cwd or self.layout.workspace,
            seccomp_fd=fds[0],
            attachment=attachment,
            data_fds=data_fds,
            command_is_init=command_is_init,
            gate_fds=gate.child_fds,
            sources=views,
        )
        env = {**self.env, **attachment.env}
        command = build_argv(plan, argv, self.bwrap)
        if overlay is not None:
            mount_step = overlay_argv(
                overlay, self.layout.workspace, layer_views if switch else None, mount_point
            )
            command = [*mount_step, *command]
            inherit_fds = [*inherit_fds, overlay.report_fd]
        # The launcher goes first: the mount step, like bwrap, runs as the sandbox user.
        command = [*(self._launcher() if switch else []), *command]
        return runner.Prepared(
            argv=command,
            env=env,
            pass_fds=[*fds, *inherit_fds],
            layout=self.layout if overlay is None else None,
            limits=self.limits,
            gate=gate,
            staged=staged,
            rlimits_set=switch and self._rlimits_by_launcher(),
            views=self._views if switch else None,
        )

    def _launcher(self) -> list[str]:
        if not self.user.switches:
            return []
        rlimits = self.limits.rlimit_argv() if self._rlimits_by_launcher() else []
        return [*rlimits, *switch_argv(self.user)]

    def _rlimits_by_launcher(self) -> bool:
        # From outside, prlimit(2) on another user's process needs CAP_SYS_RESOURCE (some
        # containers drop it); without it, one more exec (util-linux prlimit) sets them.
        return self.user.switches and not can_prlimit_others()

    def _workspace_views(self, switch: bool) -> dict[str, str]:
        """For a sandbox running as another host user: idmapped views of the workspace and
        the mounts, where their owner shows as the sandbox user (it writes to writable
        ones as their owner, and reaches them whatever the directories above allow).
        Made once for this backend (about 8 ms each) and detached when it goes."""
        if not switch:
            return {}
        with self._views_lock:
            if self._views is None:
                from .idmap import Staged

                views = Staged()
                try:
                    for source in [self.layout.workspace, *(m.host for m in self.layout.mounts)]:
                        views.add(str(source), (self.user.uid, self.user.gid))
                except BaseException:
                    views.release()
                    raise
                views.release_when_unused()  # this backend's, and runs still under way
                self._views = views
            return dict(self._views.paths)

    def _stage_attachment(self, attachment: Attachment) -> Staged | None:
        """Idmapped views of what another layer binds in for one run (the egress proxy's
        socket, an interpreter) and of a changeset's directory (its upper and work
        directories must stay on one mount), detached when the run ends."""
        sources = [*attachment.binds, *attachment.ro_binds]
        overlay = attachment.overlay
        if overlay is not None:
            parents = {os.path.dirname(overlay.upper), os.path.dirname(overlay.work)}
            sources += sorted(parents)
        if not sources:
            return None
        from .idmap import Staged

        staged = Staged()
        try:
            for source in sources:
                staged.add(source, (self.user.uid, self.user.gid))
        except BaseException:
            staged.release()
            raise
        return staged

    def dry_run(self, argv: Sequence[str], cwd: Path | None = None) -> list[str]:
        prepared = self.prepare(argv, cwd)
        prepared.close_fds()
        prepared.release_staged()
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
