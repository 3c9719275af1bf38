"""`agentvisor doctor`: what this machine can and cannot do for the sandbox, and why.

Each check returns a `Check` with a status (ok / warn / fail), what was found, what it
means for the user and how to fix it. A failed check of something the default backend
needs makes the doctor exit non-zero. The last check runs a real sandbox end to end,
because the usual failure of comparable tools (user namespaces blocked by AppArmor or
an unprivileged container) only shows when bwrap actually starts.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

from ... import hostprogs
from ...records import Declared

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from ...config import Config, SandboxConfig


class Check(Declared):
    name: str
    status: str  # "ok" | "warn" | "fail"
    found: str
    meaning: str = ""
    fix: str = ""
    required: bool = True  # a failure blocks the configured backend


def run_checks(config: Config) -> list[Check]:
    cfg = config.sandbox
    from ...gateway import has_changesets

    sessions_quota = has_changesets(config)
    limits = check_limits(cfg, sessions_quota)
    checks = [check_bwrap(), check_userns(), check_seccomp(), *limits, check_landlock()]
    if cfg.backend == "bwrap":
        checks += [check_identity(cfg), check_sandbox_runs(cfg, sessions_quota)]
    elif cfg.backend == "docker":
        checks.append(check_identity(cfg))
    else:
        checks.append(
            Check(
                "backend",
                "warn",
                f"sandbox.backend is {cfg.backend!r}",
                "commands run without isolation",
                "set sandbox.backend: bwrap",
                required=False,
            )
        )
    return [*checks, *check_docker(cfg)]


def check_bwrap() -> Check:
    path = hostprogs.find("bwrap")
    if path is None:
        return Check(
            "bubblewrap",
            "fail",
            f"bwrap not found in {', '.join(hostprogs.PROGRAM_DIRS)} (never looked up on PATH)",
            "the default sandbox backend cannot run",
            "make install (or: apt-get install bubblewrap)",
        )
    out = subprocess.run([path, "--version"], capture_output=True, text=True, check=False)
    version = out.stdout.strip().removeprefix("bubblewrap ") or "unknown version"
    return Check("bubblewrap", "ok", f"{path} ({version})")


def check_userns() -> Check:
    max_ns = _read_int("/proc/sys/user/max_user_namespaces")
    if max_ns == 0:
        return Check(
            "user namespaces",
            "fail",
            "user.max_user_namespaces = 0",
            "bwrap cannot create the sandbox's user namespace",
            "sysctl -w user.max_user_namespaces=15000",
        )
    if os.getuid() != 0 and _read_int("/proc/sys/kernel/unprivileged_userns_clone") == 0:
        return Check(
            "user namespaces",
            "fail",
            "kernel.unprivileged_userns_clone = 0",
            "unprivileged users cannot create user namespaces",
            "sysctl -w kernel.unprivileged_userns_clone=1",
        )
    if (
        os.getuid() != 0
        and _read_int("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1
    ):
        return Check(
            "user namespaces",
            "warn",
            "AppArmor restricts unprivileged user namespaces (Ubuntu 23.10+)",
            "bwrap works only if an AppArmor profile allows it; the sandbox test below tells",
            "install an AppArmor profile for /usr/bin/bwrap with "
            "'userns,' or sysctl -w kernel.apparmor_restrict_unprivileged_userns=0",
        )
    container = _container_hint()
    found = f"available (max {max_ns})" + (f"; running inside {container}" if container else "")
    return Check("user namespaces", "ok", found)


def check_seccomp() -> Check:
    status = _status_field("Seccomp")
    if status is None:
        return Check(
            "seccomp",
            "fail",
            "the kernel has no seccomp support",
            "the syscall filter cannot be applied",
            "use a kernel with CONFIG_SECCOMP",
        )
    try:
        from ...sandbox.seccomp import build_bpf

        size = len(build_bpf())
    except Exception as exc:  # any failure here means no filter; say which
        return Check(
            "seccomp",
            "fail",
            f"cannot build the filter: {exc}",
            "commands would run without a syscall filter",
            "apt-get install libseccomp2",
        )
    return Check("seccomp", "ok", f"libseccomp filter builds ({size} bytes of BPF)")


def check_limits(cfg: SandboxConfig, workspace_quota: bool = False) -> list[Check]:
    """``workspace_quota``: the gateway's sessions (and `agentvisor exec`) write the
    workspace through changesets, which sandbox.disk_mb can bound."""
    from ...sandbox.limits import cgroup_bases, cgroup_version, plan_limits

    plan = plan_limits(cfg, workspace_quota)
    version = cgroup_version()
    bases = cgroup_bases()
    checks = [
        Check(
            "cgroups",
            "ok" if bases else "warn",
            f"cgroup v{version}; per-run cgroups for: {', '.join(sorted(bases)) or 'nothing'}",
            "" if bases else "memory is limited per process only",
            "" if bases else "run as root, or under a systemd unit with Delegate=yes",
            required=False,
        )
    ]
    for key, how in sorted(plan.mechanisms.items()):
        checks.append(Check(f"limit {key}", "ok", how))
    for key, why in sorted(plan.unenforced.items()):
        status = "warn" if cfg.allow_unenforced_limits else "fail"
        checks.append(
            Check(
                f"limit {key}",
                status,
                f"cannot be enforced: {why}",
                "the sandbox refuses to run unless sandbox.allow_unenforced_limits is true",
                "give agentvisor a writable cgroup (root, or systemd Delegate=yes)",
            )
        )
    return checks


def check_landlock() -> Check:
    # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION) returns the ABI.
    libc = ctypes.CDLL(None, use_errno=True)
    abi = libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 0:
        return Check(
            "landlock",
            "warn",
            "not available",
            "no second layer of file confinement beside the mount namespace (not required)",
            "a kernel >= 5.13 with lsm=landlock",
            required=False,
        )
    return Check("landlock", "ok", f"ABI version {abi}", required=False)


def check_identity(cfg: SandboxConfig) -> Check:
    """Who sandboxes run as on the host (never uid 0), for the configured workspace."""
    from ...sandbox.identity import sandbox_user

    workspace = cfg.workspace or os.getcwd()
    try:
        user = sandbox_user(workspace)
    except OSError as exc:
        return Check("sandbox user", "fail", f"workspace {workspace}: {exc.strerror}")
    found = user.describe()
    if user.switches and os.stat(workspace).st_uid != user.uid:
        found += "; the workspace is shown to it through an idmapped mount (files stay its owner's)"
    return Check(
        "sandbox user", "ok", found, "/proc/sys and similar host-global files are read-only"
    )


def check_sandbox_runs(cfg: SandboxConfig, workspace_quota: bool = False) -> Check:
    """``workspace_quota``: as the gateway's sessions would run (whether the limits can
    be enforced is the limit checks' line; this one probes that a sandbox starts)."""
    import tempfile

    from ...errors import AgentvisorError
    from ...sandbox import Sandbox

    with tempfile.TemporaryDirectory(prefix="agentvisor-doctor-") as ws:
        try:
            sandbox = Sandbox(cfg, workspace=ws, workspace_quota=workspace_quota)
            probe = (
                "import socket\ntry:\n socket.create_connection(('1.1.1.1', 53), 1)\n"
                " print('NET')\nexcept OSError:\n print('nonet')"
            )
            result = sandbox.run(["python3", "-c", probe], timeout=30)
        except AgentvisorError as exc:
            return Check(
                "sandbox run",
                "fail",
                str(exc),
                "the sandbox cannot run here",
                "fix the failures above",
            )
    out = result.stdout.decode(errors="replace").strip()
    if result.exit_code != 0 or out != "nonet":
        err = result.stderr.decode(errors="replace").strip().splitlines()
        return Check(
            "sandbox run",
            "fail",
            f"exit {result.exit_code}: {(err or [out])[-1]}",
            "bwrap could not build the sandbox",
            "see the user namespace check; inside a container, run it with "
            "--security-opt seccomp=unconfined or use sandbox.backend: docker",
        )
    return Check(
        "sandbox run", "ok", f"a command ran with no network ({result.duration * 1000:.0f} ms)"
    )


def check_docker(cfg: SandboxConfig) -> list[Check]:
    """The docker engine and the configured image: needed when sandbox.backend is docker,
    shown (as warnings, not failures) otherwise."""
    needed = cfg.backend == "docker"
    status = "fail" if needed else "warn"
    means = "the docker backend cannot run" + ("" if needed else " (sandbox.backend: docker)")
    try:
        from docker.utils import kwargs_from_env

        import docker

        # Short when docker is optional here: an unreachable DOCKER_HOST must not stall doctor.
        api = docker.APIClient(timeout=10 if needed else 3, **kwargs_from_env())
        version = api.version().get("Version", "?")
    except Exception as exc:  # any failure means: no engine reachable
        engine = Check(
            "docker engine",
            status,
            f"not reachable: {exc}",
            means,
            "start dockerd (scripts/docker-start.sh), or set DOCKER_HOST",
            required=needed,
        )
        image = Check(
            "docker image",
            status,
            f"image {cfg.docker.image}: unknown (no engine)",
            means,
            "start the engine first",
            required=needed,
        )
        return [engine, image]
    engine = Check("docker engine", "ok", f"engine {version}")
    try:
        api.inspect_image(cfg.docker.image)
    except Exception:
        image = Check(
            "docker image",
            status,
            f"image {cfg.docker.image} is not present",
            "no docker sandbox can start (images are never pulled)",
            "scripts/docker-build-image.sh (see docs/docker.md)",
            required=needed,
        )
        return [engine, image]
    return [engine, Check("docker image", "ok", f"image {cfg.docker.image} present")]


def render(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    mark = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}
    lines = []
    for c in checks:
        lines.append(f"{mark[c.status]}  {c.name:<{width}}  {c.found}")
        if c.status != "ok":
            pad = " " * (width + 8)
            if c.meaning:
                lines.append(f"{pad}means: {c.meaning}")
            if c.fix:
                lines.append(f"{pad}fix:   {c.fix}")
    return "\n".join(lines)


def blocking_failures(checks: list[Check]) -> list[Check]:
    return [c for c in checks if c.status == "fail" and c.required]


def _read_int(path: str) -> int | None:
    try:
        return int(Path(path).read_text().strip())
    except (OSError, ValueError):
        return None


def _status_field(name: str) -> str | None:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return line.split(":", 1)[1].strip()
    return None


def _container_hint() -> str | None:
    if Path("/.dockerenv").exists():
        return "a Docker container"
    if Path("/run/.containerenv").exists():
        return "a Podman container"
    return None
