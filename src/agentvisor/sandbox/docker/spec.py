"""What a docker-backend container is, as plain data: a pure function of the config.

`build_plan` turns the config, the filesystem `Layout`, the vetted extra options and the
sandbox user into a `ContainerPlan`; `create_request` turns a plan into the Engine API
request that creates the container, `plan_hashes` into the hashes its label carries,
and `docker_run_argv` into the equivalent ``docker run`` command line for a person to
read (``agentvisor exec --dry-run``). Nothing here talks to the engine.

Every container has the same shape: all capabilities dropped (plus only the vetted
allowlist), ``no-new-privileges``, agentvisor's seccomp profile, no network, the
engine's init as pid 1 with an idle shell loop beside it, pids/memory/CPU limits, no
swap, tmpfs scratch space (``/var/tmp`` and ``/run`` noexec), an optionally read-only
image, and commands started with ``exec`` as the configured user.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...config import SandboxConfig
from ...errors import ConfigError
from ...records import Declared, Default, asdict
from ..identity import sandbox_user, view_of
from ..layout import Layout, Mask
from .options import ExtraOptions
from .seccomp import profile_json

MIB = 1024 * 1024
# pid 1 is the engine's init; this loop keeps the container alive between commands. The init
# passes the signals it gets on to the loop, and a command may signal pid 1 (its namespace's
# init takes only signals it handles): the loop ignores every one that would end it, so a
# command cannot end the container and its session's other commands (SIGKILL stops it).
IDLE = [
    "/bin/sh",
    "-c",
    "trap '' HUP INT QUIT TERM USR1 USR2 ALRM PIPE; while :; do sleep 86400; done",
    "agentvisor-idle",
]
LABEL = "agentvisor"  # prefix of every label agentvisor sets


class Bind(Declared):
    source: str
    target: str
    read_only: bool


class ContainerPlan(Declared):
    image: str
    user: str  # "uid:gid"
    home: str
    read_only_root: bool
    memory_bytes: int
    pids: int
    nano_cpus: int
    disk_mb: int | None
    shm_bytes: int
    tmpfs: dict[str, str]
    binds: list[Bind]
    masked_dirs: list[str]
    ulimits: dict[str, tuple[int, int]]
    cap_add: list[str]
    apparmor: str | None
    extra_hosts: dict[str, str] = Default(factory=dict)
    hostname: str = "agentvisor"
    labels: dict[str, str] = Default(factory=dict)

    @property
    def uid(self) -> int:
        return int(self.user.split(":")[0])


def resolve_user(setting: str, workspace: Path) -> str:
    """The ``uid:gid`` commands run as: never 0, which is the host's root (containers
    share the host's uids). ``auto`` chooses as the bwrap backend does (``identity.py``):
    the caller, or for a root caller the workspace owner or the sandbox system user."""
    if setting == "auto":
        user = sandbox_user(workspace)
        return f"{user.uid}:{user.gid}"
    uid_text, _, gid_text = setting.partition(":")
    if not uid_text.isdigit() or (gid_text and not gid_text.isdigit()):
        raise ConfigError(
            f"sandbox.docker.user: must be auto, UID or UID:GID (numbers), got {setting!r}"
        )
    uid, gid = int(uid_text), int(gid_text or uid_text)
    if uid == 0 or gid == 0:
        raise ConfigError(
            f"sandbox.docker.user: {setting!r} is root on the host (containers share its "
            "uids); use auto or an unprivileged UID:GID"
        )
    return f"{uid}:{gid}"


def build_plan(
    cfg: SandboxConfig,
    layout: Layout,
    extra: ExtraOptions,
    *,
    image: str,
    user: str,
    home: str,
    attachment_binds: list[Bind],
) -> ContainerPlan:
    size = f"size={cfg.tmp_size_mb}m"
    uid, gid = user.split(":")
    tmpfs = {
        # Docker mounts tmpfs noexec unless told otherwise; /tmp and home stay usable for
        # builds and test runs, as under bwrap.
        "/tmp": f"rw,exec,nosuid,nodev,{size},mode=1777",
        "/var/tmp": f"rw,noexec,nosuid,nodev,{size},mode=1777",
        "/run": f"rw,noexec,nosuid,nodev,{size},mode=755",
    }
    if home not in tmpfs and home != "/":
        tmpfs[home] = f"rw,exec,nosuid,nodev,{size},uid={uid},gid={gid},mode=700"
    ulimits = {"core": (0, 0)}
    fsize = cfg.file_size_mb * MIB
    ulimits["fsize"] = (fsize, fsize)
    if cfg.cpu_seconds is not None:
        ulimits["cpu"] = (cfg.cpu_seconds, cfg.cpu_seconds + 1)
    ulimits.update(extra.ulimits)
    return ContainerPlan(
        image=image,
        user=user,
        home=home,
        read_only_root=cfg.docker.read_only_root,
        memory_bytes=cfg.memory_mb * MIB,
        pids=cfg.pids,
        nano_cpus=round(cfg.docker.cpus * 1e9),
        disk_mb=cfg.docker.disk_mb,
        shm_bytes=(extra.shm_size_mb or cfg.tmp_size_mb) * MIB,
        tmpfs=tmpfs,
        binds=layout_binds(layout) + attachment_binds,
        masked_dirs=masked_dirs(layout),
        ulimits=ulimits,
        cap_add=sorted(set(extra.cap_add)),
        apparmor=extra.apparmor,
        extra_hosts=dict(extra.extra_hosts),
        hostname=extra.hostname or "agentvisor",
        labels=dict(extra.labels),
    )


def layout_binds(layout: Layout) -> list[Bind]:
    """The workspace, the configured mounts, the read-only paths and the masked files."""
    ws = str(layout.workspace)
    binds = [Bind(ws, ws, False)]
    binds += [Bind(str(m.host), str(m.inside), not m.writable) for m in layout.mounts]
    # A directory bound onto itself becomes a mount point, which cannot be renamed away.
    binds += [Bind(str(a.host), str(a.inside), False) for a in layout.anchors]
    parents, readonly = layout.readonly_binds()
    binds += [Bind(str(d), str(d), False) for d in parents]
    binds += [Bind(str(p), str(p), True) for p in readonly]
    binds += [
        Bind("/dev/null", str(m.inside), True) for m in _visible_masks(layout) if not m.is_dir
    ]
    return binds


def masked_dirs(layout: Layout) -> list[str]:
    return [str(m.inside) for m in _visible_masks(layout) if m.is_dir]


def _visible_masks(layout: Layout) -> list[Mask]:
    """Masks below what the container takes from the host (not the image's own /etc)."""
    roots = [layout.workspace, *(m.inside for m in layout.mounts)]
    return [m for m in layout.masks if any(m.inside == r or r in m.inside.parents for r in roots)]


def create_request(
    plan: ContainerPlan, seccomp: str | None = None, sources: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The Engine API body for POST /containers/create (as docker-py's keyword arguments).
    ``sources``: host directory -> the idmapped view the engine takes it from."""
    sources = sources or {}
    seccomp = seccomp or profile_json()
    security = ["no-new-privileges", f"seccomp={seccomp}"]
    if plan.apparmor:
        security.append(f"apparmor={plan.apparmor}")
    mounts = [
        {
            "Type": "bind",
            "Source": view_of(sources, b.source),
            "Target": b.target,
            "ReadOnly": b.read_only,
            "BindOptions": {"Propagation": "rprivate"},
        }
        for b in plan.binds
    ]
    mounts += [
        {
            "Type": "tmpfs",
            "Target": d,
            "ReadOnly": True,
            "TmpfsOptions": {"SizeBytes": 4096, "Mode": 0},
        }
        for d in plan.masked_dirs
    ]
    host_config = {
        "CapDrop": ["ALL"],
        "CapAdd": plan.cap_add or None,
        "SecurityOpt": security,
        "Privileged": False,
        "NetworkMode": "none",
        "IpcMode": "private",
        "PidsLimit": plan.pids,
        "Memory": plan.memory_bytes,
        "MemorySwap": plan.memory_bytes,  # equal to Memory: no swap on top
        "NanoCpus": plan.nano_cpus,
        "OomKillDisable": False,
        "ReadonlyRootfs": plan.read_only_root,
        "Init": True,
        "ShmSize": plan.shm_bytes,
        "Tmpfs": dict(plan.tmpfs),
        "Mounts": mounts,
        "Ulimits": [
            {"Name": name, "Soft": soft, "Hard": hard}
            for name, (soft, hard) in sorted(plan.ulimits.items())
        ],
        "ExtraHosts": [f"{h}:{a}" for h, a in sorted(plan.extra_hosts.items())] or None,
    }
    if plan.disk_mb is not None:
        host_config["StorageOpt"] = {"size": f"{plan.disk_mb}M"}
    return {
        "image": plan.image,
        "entrypoint": IDLE,
        "user": plan.user,
        "environment": {
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "HOME": plan.home,
        },
        "hostname": plan.hostname,
        "network_disabled": True,
        "labels": dict(plan.labels),
        "host_config": host_config,
    }


def plan_hashes(plan: ContainerPlan, image_id: str) -> dict[str, str]:
    """A hash of every setting that shapes the container, whole and by area.

    The areas let a notice say what changed when a persistent container is replaced.
    """
    data = asdict(plan)
    areas = {
        "image": {"image": plan.image, "id": image_id},
        "user": {k: data[k] for k in ("user", "home")},
        "mounts": {k: data[k] for k in ("binds", "masked_dirs", "tmpfs")},
        "limits": {
            k: data[k]
            for k in ("memory_bytes", "pids", "nano_cpus", "disk_mb", "shm_bytes", "ulimits")
        },
        "security": {
            "read_only_root": plan.read_only_root,
            "cap_add": plan.cap_add,
            "apparmor": plan.apparmor,
            "seccomp": profile_json(),
        },
        "other": {k: data[k] for k in ("extra_hosts", "hostname", "labels")},
    }
    hashes = {name: _digest(value) for name, value in areas.items()}
    hashes["all"] = _digest(hashes)
    return hashes


def _digest(value: object) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def docker_run_argv(
    plan: ContainerPlan, argv: list[str], cwd: str, env: dict[str, str]
) -> list[str]:
    """The ``docker run`` command line equivalent to one fresh-container run."""
    out = [
        "docker",
        "run",
        "--rm",
        "--init",
        "--network",
        "none",
        "--ipc",
        "private",
        "--cap-drop",
        "ALL",
    ]
    for cap in plan.cap_add:
        out += ["--cap-add", cap]
    out += [
        "--security-opt",
        "no-new-privileges",
        "--security-opt",
        "seccomp=<agentvisor profile: agentvisor.sandbox.docker.seccomp>",
    ]
    if plan.apparmor:
        out += ["--security-opt", f"apparmor={plan.apparmor}"]
    out += [
        "--pids-limit",
        str(plan.pids),
        "--memory",
        f"{plan.memory_bytes}b",
        "--memory-swap",
        f"{plan.memory_bytes}b",
        "--cpus",
        f"{plan.nano_cpus / 1e9:g}",
        "--shm-size",
        f"{plan.shm_bytes}b",
    ]
    if plan.disk_mb is not None:
        out += ["--storage-opt", f"size={plan.disk_mb}M"]
    if plan.read_only_root:
        out.append("--read-only")
    for target, options in plan.tmpfs.items():
        out += ["--tmpfs", f"{target}:{options}"]
    for b in plan.binds:
        out += [
            "--mount",
            f"type=bind,source={b.source},target={b.target}" + (",readonly" if b.read_only else ""),
        ]
    for d in plan.masked_dirs:
        out += ["--mount", f"type=tmpfs,target={d},readonly,tmpfs-size=4096,tmpfs-mode=0"]
    for name, (soft, hard) in sorted(plan.ulimits.items()):
        out += ["--ulimit", f"{name}={soft}:{hard}"]
    for host, address in sorted(plan.extra_hosts.items()):
        out += ["--add-host", f"{host}:{address}"]
    out += ["--hostname", plan.hostname, "--user", plan.user, "--workdir", cwd]
    for name in sorted(env):  # names only: docker takes the values from the caller
        out += ["--env", name]
    return [*out, plan.image, *argv]
