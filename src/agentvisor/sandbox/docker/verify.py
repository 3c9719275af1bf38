"""Check a started container against its plan, from the engine's report and the kernel's.

Hermes runs without limits when Docker quietly drops them (no cgroup delegation, no
swap accounting, a storage driver without quotas). Here, after every start and before
any command runs, the container is checked twice:

- the engine's own record (``inspect``) and the warnings it gave at creation, and
- the kernel's view of the container's init process, when this machine can see it
  (a local engine): ``/proc/PID/status`` (capabilities, no_new_privs, seccomp, uid),
  ``/proc/PID/limits``, ``/proc/PID/mountinfo`` (tmpfs sizes, noexec, read-only root)
  and the container's cgroup files (memory, swap, pids, CPU quota).

`check_container` returns the limits that are not in force, keyed by config key (the
caller refuses to run unless ``sandbox.allow_unenforced_limits``), and the security
settings that are not in force (always refused).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from ...records import Declared, Default
from .spec import MIB, ContainerPlan

# Capability numbers of the --cap-add allowlist (linux/capability.h).
CAP_NUMBERS = {
    "CHOWN": 0,
    "DAC_OVERRIDE": 1,
    "FOWNER": 3,
    "FSETID": 4,
    "KILL": 5,
    "SETGID": 6,
    "SETUID": 7,
    "NET_BIND_SERVICE": 10,
}


class KernelView(Declared, frozen=False):
    """What the kernel says about a container's init process and its cgroup."""

    pid: int
    status: dict[str, str]
    limits: dict[str, tuple[str, str]]
    mounts: dict[str, tuple[str, str, str]]  # mount point -> (fstype, flags, super options)
    cgroup: dict[str, Path] = Default(factory=dict)  # controller -> directory

    def memory_limit(self) -> int | None:
        return _first_number(self._read("memory", "memory.limit_in_bytes", "memory.max"))

    def memory_swap_limit(self) -> int | None:
        """Memory plus swap (v1 memsw), or None where the kernel has no swap accounting."""
        v1 = self._read("memory", "memory.memsw.limit_in_bytes")
        if v1 is not None:
            return _first_number(v1)
        swap = self._read("memory", "memory.swap.max")
        memory = self.memory_limit()
        if swap is None or memory is None:
            return None
        extra = _first_number(swap)
        return None if extra is None else memory + extra

    def pids_limit(self) -> int | None:
        return _first_number(self._read("pids", "pids.max"))

    def cpus(self) -> float | None:
        v2 = self._read("cpu", "cpu.max")
        if v2 is not None:
            quota, _, period = v2.partition(" ")
        else:
            quota = self._read("cpu", "cpu.cfs_quota_us") or "-1"
            period = self._read("cpu", "cpu.cfs_period_us") or "0"
        if not quota.strip().lstrip("-").isdigit() or int(quota) < 0 or not int(period or 0):
            return None
        return int(quota) / int(period)

    def oom_kills(self) -> int:
        text = self._read("memory", "memory.oom_control", "memory.events") or ""
        for line in text.splitlines():
            name, _, value = line.partition(" ")
            if name == "oom_kill":
                return int(value)
        return 0

    def _read(self, controller: str, *names: str) -> str | None:
        directory = self.cgroup.get(controller)
        if directory is None:
            return None
        for name in names:
            with contextlib.suppress(OSError):
                return (directory / name).read_text().strip()
        return None


def read_kernel_view(pid: int, container_id: str) -> KernelView | None:
    """The kernel's view of ``pid``, if it is that container's process on this machine."""
    proc = Path(f"/proc/{pid}")
    try:
        cgroup_lines = (proc / "cgroup").read_text().splitlines()
        status_text = (proc / "status").read_text()
        limits_text = (proc / "limits").read_text()
        mountinfo = (proc / "mountinfo").read_text()
    except OSError:
        return None
    # The engine's pid is only ours if the engine shares this pid namespace: check that
    # the process sits in the container's own cgroup.
    if not any(container_id in line for line in cgroup_lines):
        return None
    status = {}
    for line in status_text.splitlines():
        key, _, value = line.partition(":")
        status[key] = value.strip()
    return KernelView(
        pid=pid,
        status=status,
        limits=_parse_limits(limits_text),
        mounts=_parse_mountinfo(mountinfo),
        cgroup=_cgroup_dirs(cgroup_lines),
    )


def _parse_limits(text: str) -> dict[str, tuple[str, str]]:
    out = {}
    for line in text.splitlines()[1:]:
        parts = line[26:].split()
        if len(parts) >= 2:
            out[line[:26].strip()] = (parts[0], parts[1])
    return out


def _parse_mountinfo(text: str) -> dict[str, tuple[str, str, str]]:
    mounts = {}
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 6 and len(tail) >= 3:
            point = fields[4].replace("\\040", " ")
            mounts[point] = (tail[0], fields[5], tail[2])  # the last mount at a point wins
    return mounts


def _cgroup_dirs(lines: list[str]) -> dict[str, Path]:
    """Controller -> the container's cgroup directory, through this process's mounts."""
    mounts_v1: dict[str, Path] = {}
    mount_v2: Path | None = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3 or fields[3] != "/":
                continue
            if tail[0] == "cgroup":
                for option in tail[2].split(","):
                    mounts_v1.setdefault(option, Path(fields[4]))
            elif tail[0] == "cgroup2" and mount_v2 is None:
                mount_v2 = Path(fields[4])
    dirs: dict[str, Path] = {}
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "" and mount_v2 is not None:
            for controller in ("memory", "pids", "cpu"):
                dirs.setdefault(controller, mount_v2 / path.lstrip("/"))
        for controller in controllers.split(","):
            if controller in ("memory", "pids", "cpu") and controller in mounts_v1:
                dirs[controller] = mounts_v1[controller] / path.lstrip("/")
    # On a hybrid machine the v2 tree carries no controllers: keep only real files.
    return {c: d for c, d in dirs.items() if d.is_dir() and any(d.glob(f"{c}.*"))}


def _first_number(text: str | None) -> int | None:
    if text is None:
        return None
    word = text.split()[0] if text.split() else ""
    if not word.isdigit():
        return None  # "max": no limit
    value = int(word)
    return None if value >= 1 << 62 else value  # v1 prints "unlimited" as a huge number


def host_has_swap() -> bool:
    try:
        return len(Path("/proc/swaps").read_text().splitlines()) > 1
    except OSError:
        return True  # unknown: assume the worst


class Findings(Declared, frozen=False):
    unenforced: dict[str, list[str]] = Default(factory=dict)  # config key -> reasons
    violations: list[str] = Default(factory=list)

    def limit(self, key: str, why: str) -> None:
        self.unenforced.setdefault(key, []).append(why)


def check_container(
    plan: ContainerPlan,
    info: dict[str, Any],
    create_warnings: list[str],
    view: KernelView | None,
    *,
    swap_on_host: bool,
) -> Findings:
    found = Findings()
    _check_engine_limits(plan, info["HostConfig"], create_warnings, found, swap_on_host)
    _check_engine_security(plan, info, found)
    if view is not None:
        _check_kernel_limits(plan, view, found, swap_on_host)
        _check_kernel_security(plan, view, found)
    return found


def _mib(value: int | None) -> str:
    return "no limit" if not value else f"{value / MIB:g} MiB"


def _check_engine_limits(
    plan: ContainerPlan,
    hc: dict[str, Any],
    warnings: list[str],
    found: Findings,
    swap_on_host: bool,
) -> None:
    said = f" (the engine warned: {'; '.join(warnings)})" if warnings else ""
    if hc.get("Memory") != plan.memory_bytes:
        found.limit(
            "sandbox.memory_mb",
            f"the engine reports {_mib(hc.get('Memory'))}, not {_mib(plan.memory_bytes)}{said}",
        )
    if hc.get("MemorySwap") != plan.memory_bytes and swap_on_host:
        found.limit(
            "sandbox.memory_mb",
            "the engine does not limit swap (reports "
            f"{hc.get('MemorySwap')}) and this machine has swap, so the container may "
            f"use more than {_mib(plan.memory_bytes)}{said}",
        )
    if hc.get("PidsLimit") != plan.pids:
        found.limit(
            "sandbox.pids",
            f"the engine reports {hc.get('PidsLimit') or 'no limit'}, not {plan.pids}{said}",
        )
    if hc.get("NanoCpus") != plan.nano_cpus:
        found.limit(
            "sandbox.docker.cpus",
            f"the engine reports {hc.get('NanoCpus', 0) / 1e9:g}"
            f" CPUs, not {plan.nano_cpus / 1e9:g}{said}",
        )
    if hc.get("Tmpfs") != plan.tmpfs or hc.get("ShmSize") != plan.shm_bytes:
        found.limit(
            "sandbox.tmp_size_mb",
            f"the engine reports tmpfs {hc.get('Tmpfs')} and /dev/shm {_mib(hc.get('ShmSize'))}",
        )
    ulimits = {u["Name"]: (u["Soft"], u["Hard"]) for u in hc.get("Ulimits") or []}
    for name, key in (("fsize", "sandbox.file_size_mb"), ("cpu", "sandbox.cpu_seconds")):
        if name in plan.ulimits and ulimits.get(name) != plan.ulimits[name]:
            found.limit(
                key,
                f"the engine reports ulimit {name} {ulimits.get(name)}, not {plan.ulimits[name]}",
            )
    if plan.disk_mb is not None and (hc.get("StorageOpt") or {}).get("size") != f"{plan.disk_mb}M":
        found.limit(
            "sandbox.docker.disk_mb",
            "the engine reports no size limit on the container's writable layer",
        )


def _check_engine_security(plan: ContainerPlan, info: dict[str, Any], found: Findings) -> None:
    hc = info["HostConfig"]
    expect = {
        "Privileged": (hc.get("Privileged") is False, "the container is privileged"),
        "CapDrop": (hc.get("CapDrop") == ["ALL"], f"capabilities dropped: {hc.get('CapDrop')}"),
        "CapAdd": (
            set(hc.get("CapAdd") or []) <= set(plan.cap_add),
            f"capabilities added: {hc.get('CapAdd')}",
        ),
        "no-new-privileges": (
            "no-new-privileges" in (hc.get("SecurityOpt") or []),
            "no-new-privileges is not set",
        ),
        "seccomp": (
            any(o.startswith("seccomp={") for o in hc.get("SecurityOpt") or []),
            "agentvisor's seccomp profile is not applied",
        ),
        "NetworkMode": (hc.get("NetworkMode") == "none", f"network mode {hc.get('NetworkMode')}"),
        "namespaces": (
            not any(hc.get(k) for k in ("PidMode", "UTSMode", "UsernsMode", "CgroupParent"))
            and hc.get("IpcMode") in ("private", ""),
            "a namespace is shared with the host or another container",
        ),
        "Devices": (not hc.get("Devices"), f"host devices: {hc.get('Devices')}"),
        "ReadonlyRootfs": (
            bool(hc.get("ReadonlyRootfs")) == plan.read_only_root,
            "the image's filesystem is not read-only",
        ),
        "User": (
            info["Config"].get("User") == plan.user,
            f"runs as {info['Config'].get('User')!r}, not {plan.user}",
        ),
    }
    found.violations += [why for ok, why in expect.values() if not ok]


def _check_kernel_limits(
    plan: ContainerPlan, view: KernelView, found: Findings, swap_on_host: bool
) -> None:
    if view.cgroup.get("memory") is not None:
        memory = view.memory_limit()
        if memory != plan.memory_bytes:
            found.limit(
                "sandbox.memory_mb",
                f"the container's cgroup allows {_mib(memory)}, not {_mib(plan.memory_bytes)}",
            )
        total = view.memory_swap_limit()
        if total is not None and total != plan.memory_bytes and swap_on_host:
            found.limit(
                "sandbox.memory_mb",
                f"the container's cgroup allows memory and swap "
                f"of {_mib(total)}, not {_mib(plan.memory_bytes)}",
            )
    else:
        found.limit("sandbox.memory_mb", "the container has no memory cgroup")
    if view.cgroup.get("pids") is not None:
        pids = view.pids_limit()
        if pids != plan.pids:
            found.limit(
                "sandbox.pids",
                f"the container's cgroup allows {pids or 'any number of'}"
                f" processes, not {plan.pids}",
            )
    else:
        found.limit("sandbox.pids", "the container has no pids cgroup")
    cpus = view.cpus() if view.cgroup.get("cpu") is not None else None
    if cpus is None or abs(cpus - plan.nano_cpus / 1e9) > 0.01:
        found.limit(
            "sandbox.docker.cpus",
            f"the container's cgroup has a CPU quota of "
            f"{'none' if cpus is None else f'{cpus:g}'}, not {plan.nano_cpus / 1e9:g}",
        )
    for point, options in (*plan.tmpfs.items(), ("/dev/shm", f"size={plan.shm_bytes // MIB}m")):
        size = _option(options, "size")
        mounted = view.mounts.get(point)
        want_kib = int(size.rstrip("m")) * 1024 if size else None
        have = _option(mounted[2], "size") if mounted and mounted[0] == "tmpfs" else None
        if have != f"{want_kib}k":
            found.limit(
                "sandbox.tmp_size_mb", f"{point} is {have or 'not a sized tmpfs'}, not {want_kib}k"
            )
    limits = {
        "sandbox.file_size_mb": ("Max file size", plan.ulimits.get("fsize")),
        "sandbox.cpu_seconds": ("Max cpu time", plan.ulimits.get("cpu")),
    }
    for key, (name, want) in limits.items():
        if want is not None and view.limits.get(name) != (str(want[0]), str(want[1])):
            found.limit(
                key, f"the container's {name.lower()} is {view.limits.get(name)}, not {want}"
            )


def _check_kernel_security(plan: ContainerPlan, view: KernelView, found: Findings) -> None:
    caps = 0
    if plan.uid == 0:
        for name in plan.cap_add:
            caps |= 1 << CAP_NUMBERS[name]
    status = view.status
    if int(status.get("CapEff", "ff"), 16) & ~caps:
        found.violations.append(f"the container's init has capabilities {status.get('CapEff')}")
    if status.get("NoNewPrivs") != "1":
        found.violations.append("the kernel reports no_new_privs unset")
    if status.get("Seccomp") != "2":
        found.violations.append("the kernel reports no seccomp filter")
    if status.get("Uid", "").split()[:1] != [str(plan.uid)]:
        found.violations.append(f"the container's init runs as uid {status.get('Uid')}")
    for point in ("/var/tmp", "/run"):
        mounted = view.mounts.get(point)
        if mounted is None or "noexec" not in mounted[1].split(","):
            found.violations.append(f"{point} is not mounted noexec")
    root = view.mounts.get("/")
    if plan.read_only_root and (root is None or "ro" not in root[1].split(",")):
        found.violations.append("the image's filesystem is not mounted read-only")


def _option(options: str, name: str) -> str | None:
    for item in options.split(","):
        key, _, value = item.partition("=")
        if key == name:
            return value
    return None
