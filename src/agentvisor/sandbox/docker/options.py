"""``sandbox.docker.extra_args``: the few ``docker run`` options agentvisor accepts.

Hermes appends its users' extra arguments last, where ``--privileged`` or
``--security-opt seccomp=unconfined`` silently undo its hardening. Here every option
is parsed and checked before a container exists: options that only add harmless
settings are kept, options that weaken isolation are refused with an error naming the
option and what it would do, and anything unknown is refused too (fail closed).
"""

from __future__ import annotations

from ...errors import ConfigError
from ...records import Declared, Default

# Capabilities a --cap-add may name. They matter only for uid 0 in the container (a
# non-root user gets no effective capabilities) and none reaches outside it.
CAP_ALLOWLIST = (
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
    "NET_BIND_SERVICE",
)

# Options refused outright, with the reason shown to the user.
_REFUSED = {
    "--privileged": "gives the container every capability and every host device",
    "--device": "exposes a host device inside the sandbox",
    "--device-cgroup-rule": "lets the container open host devices",
    "--gpus": "exposes host GPU devices inside the sandbox",
    "--pid": "shares another process namespace (the host's, or a container's)",
    "--ipc": "shares another IPC namespace (the host's, or a container's)",
    "--uts": "shares the host's UTS namespace",
    "--userns": "changes the user namespace mode (host mode turns off the engine's remapping)",
    "--cgroupns": "shares the host's cgroup namespace",
    "--cgroup-parent": "moves the container out of the cgroup the engine limits",
    "--sysctl": "changes kernel settings for the container",
    "--oom-kill-disable": "turns off the memory limit's enforcement",
    "--volumes-from": "mounts another container's volumes, which agentvisor cannot check",
    "--env": "the environment comes from sandbox.env_passthrough only",
    "-e": "the environment comes from sandbox.env_passthrough only",
    "--env-file": "the environment comes from sandbox.env_passthrough only",
    "--entrypoint": "agentvisor chooses what runs in the container",
    "--workdir": "commands run in the workspace or the cwd agentvisor is given",
    "-w": "commands run in the workspace or the cwd agentvisor is given",
    "--name": "agentvisor names and tracks its own containers",
    "--tmpfs": "scratch space is /tmp, /var/tmp, /run and the home directory (sandbox.tmp_size_mb)",
    "--memory": "set sandbox.memory_mb instead (it is verified on the running container)",
    "-m": "set sandbox.memory_mb instead (it is verified on the running container)",
    "--memory-swap": "set sandbox.memory_mb instead; swap is never added",
    "--pids-limit": "set sandbox.pids instead (it is verified on the running container)",
    "--cpus": "set sandbox.docker.cpus instead (it is verified on the running container)",
    "--storage-opt": "set sandbox.docker.disk_mb instead (it is verified)",
    "--platform": "the image is used as it is",
}
_NAMESPACE_OPTIONS = ("--network", "--net", "--pid", "--ipc", "--uts", "--userns", "--cgroupns")
_TAKES_VALUE = {
    "--cap-add",
    "--cap-drop",
    "--add-host",
    "--ulimit",
    "--shm-size",
    "--security-opt",
    "--label",
    "-l",
    "--volume",
    "-v",
    "--mount",
    "--user",
    "-u",
    "--hostname",
    "-h",
    "--network",
    "--net",
    *[k for k in _REFUSED if k not in ("--privileged", "--oom-kill-disable")],
}
_NO_OP = {"--rm", "--init", "--read-only", "--cap-drop"}  # already in effect or stronger


class ExtraOptions(Declared, frozen=False):
    """What the vetted extra options add to a container."""

    cap_add: list[str] = Default(factory=list)
    extra_hosts: dict[str, str] = Default(factory=dict)
    ulimits: dict[str, tuple[int, int]] = Default(factory=dict)
    shm_size_mb: int | None = None
    apparmor: str | None = None
    labels: dict[str, str] = Default(factory=dict)
    mounts: list[tuple[int, str]] = Default(factory=list)  # (index, HOST:INSIDE[:mode])
    hostname: str | None = None


def parse_extra_args(args: list[str], *, uid: int) -> ExtraOptions:
    """Vet ``sandbox.docker.extra_args`` for a container that runs as ``uid``."""
    out = ExtraOptions()
    index = 0
    while index < len(args):
        where = f"sandbox.docker.extra_args[{index}]"
        option, value, used = split_option(args, index)
        if option in _NAMESPACE_OPTIONS and value is not None:
            _check_namespace(where, option, value)
        if option in _REFUSED:
            raise ConfigError(f"{where}: {option} refused: {_REFUSED[option]}")
        if option in _TAKES_VALUE and value is None:
            raise ConfigError(f"{where}: {option} needs a value")
        if option in _NO_OP or option in ("--network", "--net"):  # none: as already set
            pass
        elif value is None:
            raise _not_accepted(where, option)
        else:
            _apply(out, where, option, value, index, uid)
        index += used
    return out


def _apply(out: ExtraOptions, where: str, option: str, value: str, index: int, uid: int) -> None:
    """Add one vetted option that carries a value to ``out``."""
    if option == "--cap-add":
        out.cap_add.append(_capability(where, value))
    elif option == "--add-host":
        host, sep, address = value.partition(":")
        if not sep or not host or not address:
            raise ConfigError(f"{where}: --add-host wants HOST:ADDRESS, got {value!r}")
        out.extra_hosts[host] = address
    elif option == "--ulimit":
        name, limits = _ulimit(where, value)
        out.ulimits[name] = limits
    elif option == "--shm-size":
        out.shm_size_mb = _size_mb(where, value)
    elif option == "--security-opt":
        out.apparmor = _security_opt(where, value) or out.apparmor
    elif option in ("--label", "-l"):
        key, _, label = value.partition("=")
        if key.startswith("agentvisor."):
            raise ConfigError(f"{where}: labels starting with agentvisor. are agentvisor's own")
        out.labels[key] = label
    elif option in ("--volume", "-v"):
        out.mounts.append((index, value))
    elif option == "--mount":
        out.mounts.append((index, _mount_spec(where, value)))
    elif option in ("--user", "-u"):
        _refuse_user(where, value, uid)
    elif option in ("--hostname", "-h"):
        out.hostname = value
    else:
        raise _not_accepted(where, option)


def _not_accepted(where: str, option: str) -> ConfigError:
    return ConfigError(
        f"{where}: {option} is not an option agentvisor accepts here "
        "(see the list in docs/docker.md)"
    )


def split_option(args: list[str], index: int) -> tuple[str, str | None, int]:
    """(option, value, how many list items it used): ``--opt=v``, ``--opt v``, ``-v x``."""
    arg = args[index]
    if not arg.startswith("-"):
        raise ConfigError(
            f"sandbox.docker.extra_args[{index}]: {arg!r} is not an option "
            "(images and commands are not set here)"
        )
    if arg.startswith("--") and "=" in arg:
        option, _, value = arg.partition("=")
        return option, value, 1
    if arg in _TAKES_VALUE or arg in _NAMESPACE_OPTIONS:
        if index + 1 < len(args):
            return arg, args[index + 1], 2
        return arg, None, 1
    return arg, None, 1


def _check_namespace(where: str, option: str, value: str) -> None:
    mode = value.strip().lower()
    if option in ("--network", "--net"):
        if mode == "none":
            return
        raise ConfigError(
            f"{where}: {option}={value} refused: the sandbox has no network; "
            "use sandbox.network: proxy for policy-checked access"
        )
    if mode == "host" or mode.startswith("container:"):
        raise ConfigError(
            f"{where}: {option}={value} refused: it shares the "
            f"{'host' if mode == 'host' else 'other container'}'s namespace"
        )


def _capability(where: str, value: str) -> str:
    name = value.upper().removeprefix("CAP_")
    if name not in CAP_ALLOWLIST:
        raise ConfigError(
            f"{where}: --cap-add {value} refused: only {', '.join(CAP_ALLOWLIST)} may be added"
        )
    return name


def _ulimit(where: str, value: str) -> tuple[str, tuple[int, int]]:
    name, sep, limits = value.partition("=")
    soft, _, hard = limits.partition(":")
    try:
        numbers = (int(soft), int(hard or soft))
    except ValueError:
        numbers = (-1, -1)
    if not sep or not name or min(numbers) < 0 or numbers[0] > numbers[1]:
        raise ConfigError(
            f"{where}: --ulimit wants NAME=SOFT[:HARD] with SOFT <= HARD, got {value!r}"
        )
    if name in ("fsize", "cpu", "core"):
        raise ConfigError(
            f"{where}: --ulimit {name} is set from sandbox.file_size_mb, "
            "sandbox.cpu_seconds and core dumps are always off"
        )
    return name, numbers


def _size_mb(where: str, value: str) -> int:
    units = {"b": 1 / (1 << 20), "k": 1 / 1024, "m": 1, "g": 1024}
    text = value.strip().lower()
    unit = text[-1] if text[-1:] in units else "b"
    number = text[:-1] if text[-1:] in units else text
    if not number.isdigit() or int(number) == 0:
        raise ConfigError(f"{where}: --shm-size wants a size such as 256m, got {value!r}")
    return max(1, int(int(number) * units[unit]))


def _security_opt(where: str, value: str) -> str | None:
    key, _, setting = value.replace(":", "=", 1).partition("=")
    key, setting = key.strip().lower(), setting.strip()
    if key == "no-new-privileges" and setting.lower() in ("", "true"):
        return None  # always on already
    if key == "apparmor":
        if setting.lower() == "unconfined" or not setting:
            raise ConfigError(f"{where}: --security-opt {value} refused: it turns AppArmor off")
        return setting
    reasons = {
        "seccomp": "agentvisor applies its own seccomp profile (stricter than Docker's "
        "default); replacing it, or seccomp=unconfined, would weaken or remove it",
        "no-new-privileges": "no-new-privileges stays on",
        "label": "SELinux labels (label=disable, type:spc_t) can lift confinement",
        "systempaths": "systempaths=unconfined exposes /proc and /sys paths the engine masks",
    }
    reason = reasons.get(key, "not an option agentvisor accepts here")
    raise ConfigError(f"{where}: --security-opt {value} refused: {reason}")


def _mount_spec(where: str, value: str) -> str:
    """``--mount type=bind,source=..,target=..[,readonly]`` as ``HOST:INSIDE:ro|rw``."""
    fields: dict[str, str] = {}
    for part in value.split(","):
        key, sep, item = part.partition("=")
        fields[key.strip().lower()] = item.strip() if sep else "true"
    if fields.get("type", "volume") != "bind":
        raise ConfigError(
            f"{where}: --mount refused: only type=bind mounts of host "
            "directories are accepted (named volumes and others are unchecked)"
        )
    source = fields.get("source") or fields.get("src")
    target = fields.get("target") or fields.get("destination") or fields.get("dst")
    if not source or not target:
        raise ConfigError(f"{where}: --mount wants source= and target=, got {value!r}")
    extra = set(fields) - {
        "type",
        "source",
        "src",
        "target",
        "destination",
        "dst",
        "readonly",
        "ro",
    }
    if extra:
        raise ConfigError(f"{where}: --mount option {sorted(extra)[0]} is not accepted")
    writable = fields.get("readonly", fields.get("ro", "false")).lower() in ("false", "0")
    return f"{source}:{target}:{'rw' if writable else 'ro'}"


def _refuse_user(where: str, value: str, uid: int) -> None:
    name = value.split(":", 1)[0].strip()
    if name in ("0", "root") and uid != 0:
        raise ConfigError(
            f"{where}: --user {value} refused: it runs as root while "
            f"sandbox.docker.user is the non-root uid {uid}"
        )
    raise ConfigError(f"{where}: --user refused: set sandbox.docker.user instead")
