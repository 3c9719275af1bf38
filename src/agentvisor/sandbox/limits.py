"""Resource limits: how each configured limit is enforced on this machine, or why not.

Memory and process count are enforced with a cgroup per run when agentvisor may create
one (cgroup v2 delegation, or a writable v1 hierarchy); otherwise with rlimits where an
rlimit means the same thing. CPU time, file size and core dumps always use rlimits; wall
time is the runner's timer. A limit with no mechanism is reported as unenforced, and
the sandbox refuses to run unless ``sandbox.allow_unenforced_limits`` is true.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import resource
import signal
from collections.abc import Callable
from pathlib import Path

from .. import hostprogs
from ..errors import LimitNotEnforced
from ..protected import parse_mount

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from typing import Protocol

    from ..config import SandboxConfig
else:
    Protocol = object  # the protocol only matters to type checkers

CGROUP_ROOT = Path("/sys/fs/cgroup")
MIB = 1024 * 1024
MIN_SLOTS = 64
SLOT_WAIT = 10.0  # seconds to wait for a slot when every one is busy or still emptying
RECLAIM_SETTLE = 2.0  # seconds for a given-back slot to empty before giving back another
# The least a sandbox costs in host memory (bwrap, its init and a shell), for sizing slots.
SANDBOX_FLOOR_BYTES = 8 * MIB


class Cgroup:
    """A cgroup slot held by one run (one directory on v2, one per controller on v1).

    Slots are reused across runs and processes: creating a v1 memory cgroup costs
    milliseconds, so each run locks a free ``slot-N`` (flock on the directory), rewrites
    its limits, and on release kills whatever is left in it and unlocks it. Plain os
    calls on strings throughout: this runs for every command.
    """

    def __init__(self, version: int) -> None:
        self.version = version
        self.dirs: list[str] = []
        self.lock_fds: list[int] = []
        self.oom_baseline = 0

    def join_files(self) -> list[str]:
        """Where a process id is written to join. On v1, ``tasks``: moving the single
        thread of a just-started process skips the kernel's global threadgroup lock,
        whose RCU grace period costs ~10 ms per run through ``cgroup.procs``."""
        name = "tasks" if self.version == 1 else "cgroup.procs"
        return [f"{d}/{name}" for d in self.dirs]

    def oom_count(self) -> int:
        total = 0
        events = "memory.events" if self.version == 2 else "memory.oom_control"
        for d in self.dirs:
            for line in _read(f"{d}/{events}").splitlines():
                name, _, value = line.partition(" ")
                if name == "oom_kill":
                    total += int(value)
        return total

    def oom_killed(self) -> bool:
        return self.oom_count() > self.oom_baseline

    def kill_all(self) -> None:
        for d in self.dirs:
            with contextlib.suppress(OSError):
                _write(f"{d}/cgroup.kill", "1")
                continue
            for pid in _read(f"{d}/cgroup.procs").split():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)

    def empty(self) -> bool:
        """Whether the slot's processes are all gone: one being killed, or a zombie its
        new parent (often the host's init, on its own schedule) has not reaped, still
        counts against pids.max, so a run put here might not start its first process."""
        return not any(
            _read(f"{d}/pids.current").strip() not in ("", "0")
            or _read(f"{d}/cgroup.procs").strip()
            for d in self.dirs
        )

    def release(self) -> None:
        self.kill_all()
        for fd in self.lock_fds:
            os.close(fd)  # closing drops the flock
        self.lock_fds.clear()


class SlotHolder(Protocol):
    """A long-lived sandbox (a session's) that can end to free its cgroup slot."""

    def idle_since(self) -> float | None:
        """Since when (time.monotonic) it has run nothing, or None while it is busy."""
        ...

    def reclaim(self) -> bool:
        """End it if it is still idle; whether it did."""
        ...


class LimitPlan:
    """How each limit is enforced here: rlimits, cgroup settings by controller, and the
    mechanism (or the reason there is none) by config key."""

    def __init__(self) -> None:
        self.rlimits: dict[int, tuple[int, int]] = {}
        self.cgroup_settings: dict[str, dict[str, str]] = {}
        self.cgroup_bases: dict[str, Path] = {}
        self.cgroup_version = 0
        self.mechanisms: dict[str, str] = {}
        self.unenforced: dict[str, str] = {}
        self.slots = MIN_SLOTS
        self.slot_prefix = "slot-"  # the slot directories' names (tests use their own)
        self._reclaim_pause = 0.0  # no reclaim before this time (time.monotonic)
        # Long-lived sandboxes holding a slot that may give it back when every slot is taken
        # (an idle session sandbox: its session starts a new one at its next command).
        self.reclaimable: list[SlotHolder] = []
        # Where the next search for a slot starts: the least recently used slots are the
        # likeliest to be empty (a run's leftovers wait for the host's init to reap them).
        self._next_slot = 0

    def acquire_cgroup(self) -> Cgroup | None:
        """Lock a free, empty cgroup slot and write this run's limits; None without
        cgroups. A slot still emptying is passed over, and tried again later."""
        import time

        if not self.cgroup_settings:
            return None
        deadline = time.monotonic() + SLOT_WAIT
        while True:
            start = self._next_slot
            for slot in (n % self.slots for n in range(start, start + self.slots)):
                cgroup = self._try_slot(f"{self.slot_prefix}{slot}")
                if cgroup is not None:
                    self._next_slot = slot + 1
                    return cgroup
            # One sandbox given back at a time: its slot takes a moment to empty.
            if time.monotonic() >= self._reclaim_pause and self._reclaim_one():
                self._reclaim_pause = time.monotonic() + RECLAIM_SETTLE
                continue
            if time.monotonic() > deadline:
                raise LimitNotEnforced(
                    f"all {self.slots} cgroup slots are busy or still hold processes after "
                    f"{SLOT_WAIT:g} s (sandboxes this machine can hold with sandbox.pids "
                    "and its memory; end idle sessions, or lower sandbox.pids)"
                )
            time.sleep(0.01)

    def _reclaim_one(self) -> bool:
        """End the sandbox idle the longest among those that may give their slot back."""
        idle = [(since, h) for h in list(self.reclaimable) if (since := h.idle_since()) is not None]
        # any() stops at the first that gave its slot back.
        return any(holder.reclaim() for _, holder in sorted(idle, key=lambda pair: pair[0]))

    def _try_slot(self, name: str) -> Cgroup | None:
        cgroup = Cgroup(self.cgroup_version)
        try:
            for controller in self.cgroup_settings:
                d = f"{self.cgroup_bases[controller]}/{name}"
                with contextlib.suppress(FileExistsError):
                    os.mkdir(d)
                fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    cgroup.release()
                    return None
                cgroup.lock_fds.append(fd)
                cgroup.dirs.append(d)
            cgroup.kill_all()  # a holder that crashed may have left processes behind
            if not cgroup.empty():
                cgroup.release()  # still emptying: another slot serves this run
                return None
            for d, settings in zip(cgroup.dirs, self.cgroup_settings.values(), strict=True):
                _write_settings(d, settings)
        except OSError as exc:
            cgroup.release()
            raise LimitNotEnforced(f"could not set up the run's cgroup: {exc}") from exc
        cgroup.oom_baseline = cgroup.oom_count()
        return cgroup

    def apply(self, pids: list[int], cgroup: Cgroup | None, *, rlimits: bool = True) -> None:
        """Put already started processes under this plan (before their command runs);
        ``rlimits=False`` when `rlimit_argv` set them already."""
        try:
            for path in cgroup.join_files() if cgroup else ():
                fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    for pid in pids:  # the kernel takes one pid per write
                        os.write(fd, str(pid).encode())
                finally:
                    os.close(fd)
            for pid in pids if rlimits else ():
                for res, value in self.rlimits.items():
                    resource.prlimit(pid, res, value)
        except OSError as exc:
            raise LimitNotEnforced(f"could not apply the run's limits: {exc}") from exc

    def rlimit_argv(self) -> list[str]:
        """A prefix that sets the rlimits on the program it starts (util-linux prlimit):
        for processes of another user, which this process may not prlimit(2) from
        outside without CAP_SYS_RESOURCE."""
        options = [
            f"--{_PRLIMIT_OPTIONS[res]}={soft}:{hard}" for res, (soft, hard) in self.rlimits.items()
        ]
        return [PRLIMIT, *options, "--"] if options else []

    def preexec(self, cgroup: Cgroup | None) -> Callable[[], None]:
        """What the child does between fork and exec: join the cgroup, set rlimits.

        The cgroup files are opened before the fork so the child only calls write(2),
        which is safe in a forked child of a threaded process.
        """
        files = cgroup.join_files() if cgroup else []
        fds = [os.open(p, os.O_WRONLY | os.O_CLOEXEC) for p in files]
        rlimits = list(self.rlimits.items())

        def child() -> None:
            for fd in fds:
                os.write(fd, b"0")
            for res, value in rlimits:
                resource.setrlimit(res, value)

        child.fds = fds  # type: ignore[attr-defined]
        return child


PRLIMIT = "/usr/bin/prlimit"
CAP_SYS_RESOURCE = 24


@functools.cache
def can_prlimit_others() -> bool:
    """Whether this process may set another user's rlimits (CAP_SYS_RESOURCE in force)."""
    for line in _read("/proc/self/status").splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> CAP_SYS_RESOURCE & 1)
    return False


_PRLIMIT_OPTIONS = {
    resource.RLIMIT_AS: "as",
    resource.RLIMIT_CORE: "core",
    resource.RLIMIT_CPU: "cpu",
    resource.RLIMIT_FSIZE: "fsize",
    resource.RLIMIT_NPROC: "nproc",
}


def slot_count(pids: int) -> int:
    """How many sandboxes this machine could hold at once, each at its ``pids`` limit and
    at least `SANDBOX_FLOOR_BYTES` of memory: the cgroup slots to cycle through, so slots
    are never what limits sessions before the machine does (never fewer than `MIN_SLOTS`)."""
    text = _read("/proc/sys/kernel/threads-max").strip()
    tasks = int(text) if text.isdigit() else MIN_SLOTS * pids
    memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    return max(MIN_SLOTS, min(tasks // max(pids, 1), memory // SANDBOX_FLOOR_BYTES))


def _plan_disk(plan: LimitPlan, cfg: SandboxConfig, workspace_quota: bool) -> None:
    """sandbox.disk_mb: the scratch tmpfs share it, and the workspace's part is bounded
    only where every write to it lands in a changeset on a size-limited image."""
    # The workspace and the mounts are the host's own directories: bounding what lands
    # there directly would need a project quota (this kernel may have none: CONFIG_QUOTA).
    writable = [spec for spec in cfg.mounts if parse_mount(spec).writable]
    if writable:
        plan.unenforced["disk_mb"] = (
            f"the writable mount {writable[0]} (sandbox.mounts) is written directly, "
            "and it has no quota"
        )
        return
    if not workspace_quota:
        plan.unenforced["disk_mb"] = (
            "writes to the workspace land there directly (workspace.mode direct, a one-off "
            "run or a backend without changesets), and it has no quota"
        )
        return
    if os.geteuid() != 0:
        plan.unenforced["disk_mb"] = (
            "the changeset's size-limited image is loop-mounted, which needs root "
            f"(this process runs as uid {os.geteuid()})"
        )
        return
    # What agentvisor.changes.quota runs (a sibling layer: named here, not imported).
    missing = [name for name in ("mkfs.ext4", "mount", "umount") if hostprogs.find(name) is None]
    if missing:
        plan.unenforced["disk_mb"] = f"{', '.join(missing)} not installed (e2fsprogs, util-linux)"
        return
    plan.mechanisms["disk_mb"] = (
        "tmpfs size= of the scratch space and a loop-mounted ext4 image for each gateway "
        "session's changeset, shared out"
    )


def plan_limits(cfg: SandboxConfig, workspace_quota: bool = False) -> LimitPlan:
    """``workspace_quota``: every write to the workspace lands in a session changeset
    (the gateway's persistent bwrap sandboxes), which sandbox.disk_mb can bound."""
    plan = LimitPlan()
    plan.slots = slot_count(cfg.pids)
    cpu = cfg.cpu_seconds
    if cpu is not None:
        plan.rlimits[resource.RLIMIT_CPU] = (cpu, cpu + 1)
        plan.mechanisms["cpu_seconds"] = "rlimit RLIMIT_CPU"
    fsize = cfg.file_size_mb * MIB
    plan.rlimits[resource.RLIMIT_FSIZE] = (fsize, fsize)
    plan.mechanisms["file_size_mb"] = "rlimit RLIMIT_FSIZE"
    plan.rlimits[resource.RLIMIT_CORE] = (0, 0)
    plan.mechanisms["timeout"] = "wall-clock timer (SIGKILL of the whole sandbox)"
    if cfg.disk_mb is not None:
        _plan_disk(plan, cfg, workspace_quota)

    bases = cgroup_bases()
    version = cgroup_version()
    memory = cfg.memory_mb * MIB
    if "memory" in bases:
        plan.cgroup_version = version
        plan.cgroup_bases["memory"] = bases["memory"]
        if version == 2:
            plan.cgroup_settings["memory"] = {"memory.max": str(memory), "memory.swap.max": "0"}
            plan.mechanisms["memory_mb"] = "cgroup v2 memory.max (whole sandbox)"
        else:
            settings = {"memory.limit_in_bytes": str(memory)}
            if (bases["memory"] / "memory.memsw.limit_in_bytes").exists():
                settings["memory.memsw.limit_in_bytes"] = str(memory)
            plan.cgroup_settings["memory"] = settings
            plan.mechanisms["memory_mb"] = "cgroup v1 memory.limit_in_bytes (whole sandbox)"
    else:
        plan.rlimits[resource.RLIMIT_AS] = (memory, memory)
        plan.mechanisms["memory_mb"] = "rlimit RLIMIT_AS (per process: no cgroup available)"

    if "pids" in bases:
        plan.cgroup_version = version
        plan.cgroup_bases["pids"] = bases["pids"]
        plan.cgroup_settings.setdefault("pids", {})["pids.max"] = str(cfg.pids)
        plan.mechanisms["pids"] = f"cgroup v{version} pids.max (whole sandbox)"
    elif os.getuid() != 0:
        # Counted per user namespace since Linux 5.14, so host processes do not count.
        plan.rlimits[resource.RLIMIT_NPROC] = (cfg.pids, cfg.pids)
        plan.mechanisms["pids"] = "rlimit RLIMIT_NPROC"
    else:
        plan.unenforced["pids"] = (
            "no writable pids cgroup, and RLIMIT_NPROC does not bind processes of uid 0"
        )
    if version == 2 and "memory" in bases and "pids" in bases:
        # One directory holds both controllers on v2.
        plan.cgroup_settings = {
            "memory": {**plan.cgroup_settings["memory"], **plan.cgroup_settings["pids"]}
        }
    return plan


def check_enforced(plan: LimitPlan, cfg: SandboxConfig) -> list[str]:
    """Refuse unenforceable limits unless allowed; return warnings for allowed ones."""
    if not plan.unenforced:
        return []
    lines = [
        f"sandbox.{name}: cannot be enforced here: {why}" for name, why in plan.unenforced.items()
    ]
    if not cfg.allow_unenforced_limits:
        raise LimitNotEnforced(
            "; ".join(lines) + " (see `agentvisor doctor`; set sandbox.allow_unenforced_limits: "
            "true to run anyway)"
        )
    return [line + " (running anyway: sandbox.allow_unenforced_limits is true)" for line in lines]


def cgroup_version() -> int:
    return 2 if (CGROUP_ROOT / "cgroup.controllers").exists() else 1


def cgroup_bases() -> dict[str, Path]:
    """Writable parent directories for per-run cgroups, by controller."""
    if cgroup_version() == 2:
        base = _v2_base()
        if base is None:
            return {}
        enabled = (base / "cgroup.subtree_control").read_text().split()
        return {c: base for c in ("memory", "pids") if c in enabled}
    bases = {}
    for controller in ("memory", "pids"):
        base = _v1_base(controller)
        if base is not None:
            bases[controller] = base
    return bases


def _own_cgroup(controller: str) -> str | None:
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path
    return None


def _v1_base(controller: str) -> Path | None:
    own = _own_cgroup(controller)
    mount = CGROUP_ROOT / controller
    if own is None or not mount.is_dir():
        return None
    # Nest below our own cgroup so runs stay inside whatever limits already bind us.
    base = mount / own.lstrip("/") / "agentvisor"
    return base if _ensure_dir(base) else None


def _v2_base() -> Path | None:
    if os.getuid() != 0:
        return None
    base = CGROUP_ROOT / "agentvisor"
    if not _ensure_dir(base):
        return None
    try:
        (CGROUP_ROOT / "cgroup.subtree_control").write_text("+memory +pids")
        (base / "cgroup.subtree_control").write_text("+memory +pids")
    except OSError:
        pass
    return base


def _ensure_dir(path: Path) -> bool:
    try:
        path.mkdir(exist_ok=True)
    except OSError:
        return False
    return os.access(path, os.W_OK)


def _write_settings(directory: str, settings: dict[str, str]) -> None:
    """Write limits; retry in reverse order, since v1 needs memsw >= limit at every step."""
    try:
        for key, value in settings.items():
            _write(f"{directory}/{key}", value)
    except OSError:
        for key, value in reversed(settings.items()):
            _write(f"{directory}/{key}", value)


def _read(path: str) -> str:
    """A cgroup file's text, or "" when it cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return ""
    chunks = []
    try:
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
    except OSError:
        return ""
    finally:
        os.close(fd)
    return b"".join(chunks).decode()


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)
