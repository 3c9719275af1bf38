"""Turn a Hermes Agent ``config.yaml`` into an agentvisor config, never widening access.

`import_hermes` reads the parts of a Hermes config that decide what the agent may do --
``terminal`` (backend, Docker settings, limits, mounts, forwarded variables, timeout),
``approvals`` (mode, timeout, cron/single-query/unattended modes, deny globs),
``command_allowlist``, ``toolsets``/``platform_toolsets``, ``security`` (website
blocklist, private URLs) and ``HERMES_WRITE_SAFE_ROOT`` -- and returns the equivalent
agentvisor config with four lists for the person running the import:

- ``mapped``: carried over with the same meaning;
- ``stricter``: carried over more narrowly, with the reason (Hermes' full container
  network, credentials forwarded into the sandbox, auto-approval when nobody answers);
- ``refused``: what agentvisor would refuse to run (a writable mount of a system
  directory), left out so the result runs;
- ``unmapped``: what has no agentvisor equivalent and was left out (or, where agentvisor
  necessarily differs, what changed and how to get the old behaviour deliberately).

Every key of the input (and of Hermes' ``.env``) lands in one of them. A value of the
wrong type is an error, never read character by character.

Anything that would give the agent more than Hermes did is never emitted silently. The
result validates against agentvisor's schema (`agentvisor.config.config_from_dict`).
Keys are those of Hermes' documented configuration (website/docs/user-guide/
configuration.md and security.md in NousResearch/hermes-agent).
"""

from __future__ import annotations

import math
import os
import shlex
from collections.abc import Mapping
from typing import Any

from . import protected
from .errors import ConfigError
from .records import Declared, Default
from .sandbox.env import looks_like_credential

# Sections that decide access; every other top-level section is about models, chat
# platforms, memory and the like, and is only listed as ignored.
ACCESS_SECTIONS = (
    "terminal",
    "approvals",
    "command_allowlist",
    "toolsets",
    "platform_toolsets",
    "security",
)
# Hermes toolsets and the agentvisor toolsets that give the same tools (or fewer).
TOOLSETS = {
    "terminal": ["terminal"],
    "code_execution": ["terminal"],
    "file": ["file"],
    "web": ["web"],
}
# Hermes' composite toolsets give every core tool; agentvisor's equivalents, no more.
COMPOSITE = ["file", "terminal", "web"]
REMOTE_BACKENDS = ("ssh", "modal", "daytona", "vercel_sandbox", "singularity")


class Import(Declared, frozen=False):
    config: dict[str, Any] = Default(factory=dict)
    mapped: list[str] = Default(factory=list)
    stricter: list[str] = Default(factory=list)
    refused: list[str] = Default(factory=list)
    unmapped: list[str] = Default(factory=list)

    def reported(self, key: str) -> bool:
        """Whether a line of the report names ``key`` (each line starts with its key)."""
        lines = (*self.mapped, *self.stricter, *self.refused, *self.unmapped)
        return any(_names(line, key) for line in lines)

    def set(self, path: str, value: Any) -> None:
        node = self.config
        *parents, last = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value


def import_hermes(data: Any, env: Mapping[str, str] | None = None) -> Import:
    """Map a parsed Hermes config; ``env``: Hermes' ``.env`` (and HERMES_WRITE_SAFE_ROOT
    from the environment)."""
    if not isinstance(data, dict):
        raise ConfigError("a Hermes config.yaml must be a mapping of sections")
    if odd := [key for key in data if not isinstance(key, str)]:
        raise ConfigError(f"Hermes config: {odd[0]!r}: a section name must be a word")
    env = env or {}
    out = Import()
    terminal = _section(data, "terminal")
    _backend(terminal, out)
    _docker(terminal, out)
    _terminal_common(terminal, out)
    approvals = _section(data, "approvals")
    _approvals(approvals, out)
    _allowlist(_list(data, "command_allowlist", "command_allowlist"), out)
    _toolsets(data, out)
    security = _section(data, "security")
    _security(security, out)
    _write_root(env.get("HERMES_WRITE_SAFE_ROOT"), out)
    ignored = sorted(k for k in data if k not in ACCESS_SECTIONS and not str(k).startswith("_"))
    if ignored:
        out.unmapped.append(f"ignored, not about what the agent may reach: {', '.join(ignored)}")
    for section, keys in (("terminal", terminal), ("approvals", approvals), ("security", security)):
        for key in keys:
            if not out.reported(f"{section}.{key}"):
                out.unmapped.append(f"{section}.{key}: no agentvisor equivalent; left out")
    for name in sorted(set(env) - {"HERMES_WRITE_SAFE_ROOT"}):
        out.unmapped.append(
            f".env {name}: a setting of Hermes itself (chat platforms, proxies, keys), "
            "not of what the agent may reach; left out"
        )
    return out


def _names(line: str, key: str) -> bool:
    """Whether a report line is about ``key`` (it names it before its colon or arrow)."""
    head = line.split(" -> ", 1)[0]
    return any(
        part.strip() == key or part.strip().startswith(f"{key}:")
        for part in head.replace("/", ",").split(",")
    )


def _kind(value: Any) -> str:
    kinds = {
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        dict: "a mapping",
        list: "a list",
        type(None): "an empty value",
    }
    return kinds.get(type(value), type(value).__name__)


def _section(data: dict, name: str) -> dict:
    value = data.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(
            f"Hermes config: {name}: expected a mapping, got {_kind(value)} {value!r}"
        )
    return value


def _list(section: dict, key: str, where: str) -> list[Any]:
    """A list value; anything else is an error (a string is not read letter by letter)."""
    value = section.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"Hermes config: {where}: expected a list, got {_kind(value)} {value!r}")
    for index, item in enumerate(value):
        # Words, names and numbers (`--pids-limit, 128`); a nested list, a mapping or an
        # empty entry would be read as the text of its Python form.
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise ConfigError(
                f"Hermes config: {where}[{index}]: expected a word or a number, "
                f"got {_kind(item)} {item!r}"
            )
    return value


def _number(section: dict, key: str, where: str, *, zero: bool = False) -> float:
    """A number greater than 0 (or 0 when ``zero``); anything else is an error saying why."""
    value = section[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(
            f"Hermes config: {where}: expected a number, got {_kind(value)} {value!r}"
        )
    if not math.isfinite(value):
        raise ConfigError(f"Hermes config: {where}: must be a finite number, got {value}")
    if value < 0 or (value == 0 and not zero):
        wanted = "0 (no limit) or more" if zero else "greater than 0"
        raise ConfigError(f"Hermes config: {where}: must be {wanted}, got {value}")
    return value


def _flag(section: dict, key: str, where: str) -> bool:
    value = section[key]
    if not isinstance(value, bool):
        raise ConfigError(
            f"Hermes config: {where}: expected true or false, got {_kind(value)} {value!r}"
        )
    return value


# -- terminal ------------------------------------------------------------------------------


def _backend(t: dict, out: Import) -> None:
    backend = t.get("backend", "local")
    if backend == "docker":
        out.set("sandbox.backend", "docker")
        out.mapped.append("terminal.backend: docker -> sandbox.backend: docker")
    elif backend == "local":
        out.set("sandbox.backend", "bwrap")
        out.stricter.append(
            "terminal.backend: local -> sandbox.backend: bwrap (Hermes ran "
            "commands on the host with your files, network and credentials; "
            "agentvisor runs them in a sandbox)"
        )
    elif backend in REMOTE_BACKENDS:
        out.set("sandbox.backend", "bwrap")
        out.unmapped.append(
            f"terminal.backend: {backend}: agentvisor has no {backend} "
            "backend; commands run here in the bwrap sandbox instead"
        )
    else:
        out.unmapped.append(
            f"terminal.backend: {backend!r} is not a Hermes backend agentvisor "
            "knows; the default sandbox (bwrap) applies"
        )


def _docker(t: dict, out: Import) -> None:
    docker = t.get("backend") == "docker"
    if "docker_image" in t:
        out.set("sandbox.docker.image", str(t["docker_image"]))
        out.mapped.append(
            f"terminal.docker_image -> sandbox.docker.image: {t['docker_image']} "
            "(agentvisor never pulls it: it must be on this machine)"
        )
    _limit(t, "container_cpu", "sandbox.docker.cpus", float, out)
    _limit(t, "container_memory", "sandbox.memory_mb", int, out)
    _limit(
        t,
        "container_disk",
        "sandbox.docker.disk_mb",
        int,
        out,
        note="enforced only by a storage driver with quotas (overlay2 on XFS with pquota); "
        "without one agentvisor refuses to run until you remove it or set "
        "sandbox.allow_unenforced_limits",
    )
    if "container_persistent" in t:
        persistent = _flag(t, "container_persistent", "terminal.container_persistent")
        out.set("sandbox.persistent", persistent)
        out.mapped.append(
            f"terminal.container_persistent -> sandbox.persistent: "
            f"{str(persistent).lower()} (one container per "
            "session; "
            "agentvisor replaces it when its settings change)"
        )
    network = t.get("docker_network", True)
    if docker or "docker_network" in t:
        if network:
            out.stricter.append(
                "terminal.docker_network: true -> sandbox.network: none (Hermes "
                "gave the container the full network; agentvisor gives none. "
                "For named hosts only: sandbox.network: proxy plus fetch rules)"
            )
        else:
            out.mapped.append("terminal.docker_network: false -> sandbox.network: none")
        out.set("sandbox.network", "none")
    if "docker_volumes" in t:
        _volumes(_list(t, "docker_volumes", "terminal.docker_volumes"), out)
    if t.get("docker_run_as_host_user") is False or (docker and "docker_run_as_host_user" not in t):
        out.stricter.append(
            "terminal.docker_run_as_host_user: false -> sandbox.docker.user: "
            "auto (Hermes ran commands as root in the container with "
            "DAC_OVERRIDE, CHOWN and FOWNER; agentvisor runs them as you, with "
            "no capabilities)"
        )
    elif t.get("docker_run_as_host_user"):
        out.mapped.append("terminal.docker_run_as_host_user: true -> sandbox.docker.user: auto")
    if "docker_extra_args" in t:
        _extra_args(_list(t, "docker_extra_args", "terminal.docker_extra_args"), out)
    if "docker_env" in t:
        names = ", ".join(sorted(map(str, _section(t, "docker_env"))))
        out.unmapped.append(
            f"terminal.docker_env ({names}): agentvisor sets no literal "
            "variables in the sandbox; put them in a script in the workspace"
        )
    if t.get("docker_mount_cwd_to_workspace") is False and docker:
        out.unmapped.append(
            "terminal.docker_mount_cwd_to_workspace: false: agentvisor always "
            "gives the sandbox its workspace (the current directory or "
            "sandbox.workspace) read-write; point sandbox.workspace at an "
            "empty directory to keep your launch directory out"
        )
    elif t.get("docker_mount_cwd_to_workspace"):
        out.mapped.append(
            "terminal.docker_mount_cwd_to_workspace: true -> the workspace is "
            "mounted read-write (at its own path, not /workspace)"
        )
    for key in (
        "docker_persist_across_processes",
        "docker_shared_container_key",
        "docker_orphan_reaper",
        "docker_snap_compat",
    ):
        if key in t:
            out.unmapped.append(
                f"terminal.{key}: not needed: agentvisor names a session's "
                "container after the workspace, session and user, and "
                "replaces it when its settings change"
            )


def _limit(t: dict, key: str, target: str, kind: type, out: Import, note: str = "") -> None:
    if key not in t:
        return
    value = _number(t, key, f"terminal.{key}", zero=True)
    if value == 0:
        default = _default(target)
        if default is None:
            out.mapped.append(
                f"terminal.{key}: 0 (Hermes: no limit) -> {target} not set (no limit either)"
            )
        else:
            out.stricter.append(
                f"terminal.{key}: 0 (Hermes: no limit) -> {target}: {default}, agentvisor's "
                "default (every limit is enforced)"
            )
        return
    out.set(target, kind(value))
    out.mapped.append(
        f"terminal.{key}: {value} -> {target}: {kind(value)}" + (f" ({note})" if note else "")
    )


def _default(target: str) -> Any:
    """The schema's default of a dotted config key."""
    from .config.schema import Config

    value: Any = Config()
    for part in target.split("."):
        value = getattr(value, part)
    return value


def _refusal(spec: str) -> str | None:
    """Why the sandbox would refuse the mount ``HOST:INSIDE[:ro|rw]`` (None: it would not)."""
    parts = spec.split(":")
    host = os.path.realpath(os.path.expanduser(parts[0]))
    writable = len(parts) < 3 or parts[2] == "rw"  # docker -v is read-write by default
    if writable and host in protected.SYSTEM_DIRS:
        return f"{host} is a system directory, which is never mounted writable"
    return None


def _volumes(volumes: list[Any], out: Import) -> None:
    mounts = []
    guarded = [str(p) for p in protected.protected_paths()]
    for spec in volumes:
        parts = str(spec).split(":")
        if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            out.unmapped.append(f"terminal.docker_volumes: {spec!r} is not HOST:CONTAINER[:ro]")
            continue
        host = os.path.realpath(os.path.expanduser(parts[0]))
        if not os.path.isabs(os.path.expanduser(parts[0])):
            out.unmapped.append(
                f"terminal.docker_volumes: {spec!r}: named volumes are not "
                "supported; mount a host directory"
            )
            continue
        hit = [g for g in guarded if host == g or host.startswith(g.rstrip("/") + "/")]
        if hit:
            out.stricter.append(
                f"terminal.docker_volumes: {spec!r} dropped: {hit[0]} is a "
                "protected path agentvisor never mounts"
            )
            continue
        mode = parts[2] if len(parts) == 3 else "rw"  # docker -v is read-write by default
        refusal = _refusal(str(spec))
        if refusal:
            out.refused.append(f"terminal.docker_volumes: {spec!r} left out: {refusal}")
            continue
        mounts.append(f"{parts[0]}:{parts[1]}:{mode}")
        notes = ["read-write as in Hermes; drop :rw for read-only"] if mode == "rw" else []
        if not os.path.exists(host):
            notes.append(f"{host} does not exist here: create it or remove the mount")
        out.mapped.append(
            f"terminal.docker_volumes: {spec} -> sandbox.mounts: "
            f"{parts[0]}:{parts[1]}:{mode}" + (f" ({'; '.join(notes)})" if notes else "")
        )
    if mounts:
        out.set("sandbox.mounts", mounts)


# Resource limits Hermes users pass as docker options, and the setting each becomes.
LIMIT_OPTIONS = {
    "--pids-limit": "sandbox.pids",
    "--memory": "sandbox.memory_mb",
    "-m": "sandbox.memory_mb",
    "--cpus": "sandbox.docker.cpus",
    "--cpu-quota": "sandbox.docker.cpus",  # per --cpu-period (docker's default: 100000 µs)
    "--cpuset-cpus": "sandbox.docker.cpus",  # as many cores as the set names
    "--storage-opt": "sandbox.docker.disk_mb",
}
CPU_PERIOD = 100_000  # µs: docker's --cpu-period when none is given
_UNITS = {"b": 1 / 2**20, "k": 1 / 1024, "m": 1, "g": 1024, "t": 1024 * 1024}


def _extra_args(args: list[Any], out: Import) -> None:
    from .sandbox.docker.options import parse_extra_args, split_option

    kept: list[str] = []
    items = [str(a) for a in args]
    period = _cpu_period(items)
    index = 0
    while index < len(items):
        option = items[index].partition("=")[0]
        if option in LIMIT_OPTIONS:
            index += _limit_option(items, index, out, period)
            continue
        if option == "--cpu-period":  # read with --cpu-quota above; no limit by itself
            used = 1 if "=" in items[index] else 2
            out.mapped.append(
                f"terminal.docker_extra_args: {shlex.join(items[index : index + used])} "
                "-> the period of --cpu-quota"
            )
            index += used
            continue
        # One option (with its value) at a time, so a refused one drops only itself.
        try:
            used = split_option(items, index)[2]
        except ConfigError:
            used = 1  # not an option at all: parse_extra_args says so below
        candidate = items[index : index + used]
        try:
            mounts = parse_extra_args(candidate, uid=1000).mounts
        except ConfigError as exc:
            reason = str(exc).split(": ", 1)[1]
            out.stricter.append(
                f"terminal.docker_extra_args: {shlex.join(candidate)} dropped: {reason}"
            )
        else:
            refusal = next((r for _, spec in mounts if (r := _refusal(spec))), None)
            if refusal:
                out.refused.append(
                    f"terminal.docker_extra_args: {shlex.join(candidate)} left out: {refusal}"
                )
            else:
                kept += candidate
        index += used
    if kept:
        out.set("sandbox.docker.extra_args", kept)
        out.mapped.append(
            f"terminal.docker_extra_args -> sandbox.docker.extra_args: {shlex.join(kept)}"
        )


def _cpu_period(items: list[str]) -> float:
    """The --cpu-period among docker options, in µs (docker's default when absent)."""
    for index, item in enumerate(items):
        option, eq, value = item.partition("=")
        if option == "--cpu-period":
            value = value if eq else (items[index + 1] if index + 1 < len(items) else "")
            try:
                return float(value) if float(value) > 0 else CPU_PERIOD
            except ValueError:
                raise ConfigError(
                    f"Hermes config: terminal.docker_extra_args: --cpu-period {value}: "
                    "not a limit agentvisor can read"
                ) from None
    return CPU_PERIOD


def _limit_option(items: list[str], index: int, out: Import, period: float) -> int:
    """A limit given as a docker option becomes its setting: Hermes adds its extra args
    last, so this is the limit Hermes ran with. Returns how many items it used."""
    option, _, value = items[index].partition("=")
    used = 1 if value else 2
    if not value:
        value = items[index + 1] if index + 1 < len(items) else ""
    where = f"terminal.docker_extra_args: {shlex.join(items[index : index + used])}"
    target = LIMIT_OPTIONS[option]
    amount = _limit_amount(option, value)
    if amount is not None and option == "--cpu-quota":
        amount /= period
    if amount is not None and option == "--cpuset-cpus":
        # The set and --cpus both hold: the smaller is what Hermes ran with.
        current = out.config.get("sandbox", {}).get("docker", {}).get("cpus")
        amount = min(amount, current) if current else amount
    if amount is None:
        raise ConfigError(f"Hermes config: {where}: not a limit agentvisor can read")
    if amount <= 0:  # docker's "no limit" (-1 or 0)
        default = _default(target)
        out.stricter.append(f"{where} (no limit) -> {target}: {default}, agentvisor's default")
        return used
    setting: float | int = amount if target == "sandbox.docker.cpus" else max(1, round(amount))
    out.set(target, setting)
    out.mapped.append(f"{where} -> {target}: {setting} (Hermes applies its extra args last)")
    return used


def _limit_amount(option: str, value: str) -> float | None:
    """The option's value in the setting's unit (processes, MB, cores); None: unreadable."""
    import re

    if option == "--storage-opt":
        name, _, value = value.partition("=")
        if name != "size":
            return None
    if option in ("--pids-limit", "--cpus", "--cpu-quota"):
        try:
            return float(value)
        except ValueError:
            return None
    if option == "--cpuset-cpus":
        return _cpuset_size(value)
    match = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s*([bkmgt]?)b?", value.strip().lower())
    if match is None:
        return None
    return float(match.group(1)) * _UNITS[match.group(2) or "b"]


def _cpuset_size(value: str) -> float | None:
    """How many cores a cpuset names (``0-3,6`` → 5); None: unreadable."""
    import re

    count = 0
    for part in value.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if match is None:
            return None
        first, last = int(match.group(1)), int(match.group(2) or match.group(1))
        if last < first:
            return None
        count += last - first + 1
    return float(count)


def _terminal_common(t: dict, out: Import) -> None:
    if "timeout" in t:
        out.set("sandbox.timeout", float(_number(t, "timeout", "terminal.timeout")))
        out.mapped.append(f"terminal.timeout: {t['timeout']} -> sandbox.timeout")
    if "lifetime_seconds" in t and t.get("backend") == "docker":
        lifetime = _number(t, "lifetime_seconds", "terminal.lifetime_seconds")
        out.set("sandbox.idle_timeout", float(lifetime))
        out.mapped.append(
            f"terminal.lifetime_seconds: {t['lifetime_seconds']} -> sandbox.idle_timeout"
        )
    names = [
        *_list(t, "docker_forward_env", "terminal.docker_forward_env"),
        *_list(t, "env_passthrough", "terminal.env_passthrough"),
    ]
    if names:
        keys = [f"terminal.{k}" for k in ("docker_forward_env", "env_passthrough") if k in t]
        _passthrough([str(n) for n in names], ", ".join(keys), out)
    cwd = t.get("cwd")
    if cwd in (".", ""):
        out.mapped.append(f"terminal.cwd: {cwd!r} -> the workspace (the current directory)")
    elif cwd is not None and t.get("backend", "local") == "local":
        out.set("sandbox.workspace", str(cwd))
        out.mapped.append(f"terminal.cwd: {cwd} -> sandbox.workspace")
    elif cwd is not None:
        out.unmapped.append(
            f"terminal.cwd: {cwd} is a path inside Hermes' container; the "
            "sandbox starts in its workspace"
        )
    if "sudo_password" in t:
        out.stricter.append(
            "terminal.sudo_password: not imported: commands never get sudo "
            "in agentvisor's sandbox (and remove the plaintext password from "
            "the Hermes config)"
        )
    if "credential_files" in t:
        out.stricter.append(
            "terminal.credential_files: not mounted: define them under "
            "secrets: with the hosts each may reach (docs/network.md)"
        )
    for key in ("home_mode", "persistent_shell", "temp_dir", "font_family"):
        if key in t:
            out.unmapped.append(
                f"terminal.{key}: no equivalent (the sandbox has its own "
                "empty home and scratch space)"
            )


def _passthrough(names: list[str], keys: str, out: Import) -> None:
    plain = sorted({n for n in names if not looks_like_credential(n)})
    secret = sorted({n for n in names if looks_like_credential(n)})
    if plain:
        out.set("sandbox.env_passthrough", plain)
        out.mapped.append(f"{keys} -> sandbox.env_passthrough: {', '.join(plain)}")
    if secret:
        out.stricter.append(
            f"{keys}: credentials not forwarded into the sandbox: {', '.join(secret)} "
            "(code there could read and send them anywhere). Define each under "
            "secrets: with env: NAME and the hosts it may reach; the agent then "
            "writes {{secret:NAME}} and agentvisor adds the value on the way out "
            "(docs/network.md)"
        )


# -- approvals and policy ------------------------------------------------------------------


def _approvals(a: dict, out: Import) -> None:
    mode = a.get("mode")
    if mode is False:  # YAML 1.1 reads a bare `off` as false
        mode = "off"
    if mode in ("smart", "manual", "off"):
        out.set("approvals.mode", mode)
        out.mapped.append(
            f"approvals.mode: {mode} -> approvals.mode: {mode}"
            + (" (agentvisor's hardline floor and deny rules still hold)" if mode == "off" else "")
        )
    elif mode is not None:
        out.unmapped.append(f"approvals.mode: {mode!r} unknown; agentvisor's default (manual)")
    if "timeout" in a:
        out.set("approvals.timeout", float(_number(a, "timeout", "approvals.timeout")))
        out.mapped.append(f"approvals.timeout: {a['timeout']} -> approvals.timeout")
    for key in ("cron_mode", "single_query_mode", "unattended_mode"):
        if key not in a:
            continue
        if a[key] == "approve":
            out.stricter.append(
                f"approvals.{key}: approve -> approvals.unattended: deny "
                "(agentvisor never approves what nobody looked at; allow the "
                "commands such jobs need with rules:)"
            )
        else:
            out.mapped.append(f"approvals.{key}: {a[key]} -> approvals.unattended: deny")
        out.set("approvals.unattended", "deny")
    for pattern in _list(a, "deny", "approvals.deny"):
        _deny_rule(str(pattern), out)
    for key in ("mcp_reload_confirm", "destructive_slash_confirm"):
        if key in a:
            out.unmapped.append(f"approvals.{key}: a Hermes chat command setting; no equivalent")


def _deny_rule(glob: str, out: Import) -> None:
    """A Hermes deny glob as an agentvisor exec deny rule (deny rules only narrow)."""
    try:
        tokens = shlex.split(glob)
    except ValueError:
        tokens = []
    shell = any(c in glob for c in "|;&<>`$")
    if not tokens or tokens[0].startswith("*") or shell:
        out.unmapped.append(
            f"approvals.deny: {glob!r}: a glob over the whole command text has "
            "no token pattern; agentvisor's categories cover pipe-to-shell and "
            "the like, or write a deny rule per command"
        )
        return
    # Hermes matches its deny globs ignoring case (`RM -RF x` is denied by `rm -rf *`):
    # each letter becomes a class of both cases, so the rule keeps that meaning.
    pattern = " ".join(
        _any_case(t) if t == shlex.quote(t) or _is_glob(t) else shlex.quote(t) for t in tokens
    )
    if tokens[-1] != "*" and _is_glob(tokens[-1]):
        pattern += " *"  # Hermes' trailing glob also matched further arguments
    out.config.setdefault("rules", []).append(
        {
            "decision": "deny",
            "kind": "exec",
            "pattern": pattern,
            "reason": f"imported from Hermes approvals.deny: {glob}",
        }
    )
    out.mapped.append(
        f"approvals.deny: {glob!r} -> rules: deny exec {pattern!r} (any case, as in Hermes)"
    )


def _is_glob(token: str) -> bool:
    return any(c in token for c in "*?[")


def _any_case(token: str) -> str:
    """``token`` as a glob that matches it in any case: ``rm`` -> ``[rR][mM]``."""
    out = []
    in_class = False
    for char in token:
        if char == "[" and not in_class:
            in_class = True
            out.append(char)
        elif char == "]" and in_class:
            in_class = False
            out.append(char)
        elif char.lower() == char.upper():
            out.append(char)
        elif in_class:  # inside a class already: add the other case
            out.append(char.lower() + char.upper())
        else:
            out.append(f"[{char.lower()}{char.upper()}]")
    return "".join(out)


def _allowlist(entries: list[Any], out: Import) -> None:
    if not entries:
        return
    names = ", ".join(str(e) for e in entries)
    out.stricter.append(
        f"command_allowlist ({names}): not imported: Hermes stores the names of "
        "its regex classes there, which say nothing exact about a command. "
        "Those commands now ask (and are denied when nobody answers); allow "
        "the exact ones you trust with rules: (decision: allow, kind: exec)"
    )


def _toolsets(data: dict, out: Import) -> None:
    names = [str(n) for n in _list(data, "toolsets", "toolsets")]
    platforms = _section(data, "platform_toolsets")
    if platforms:
        names += [str(n) for n in _list(platforms, "cli", "platform_toolsets.cli")]
        others = sorted(str(k) for k in platforms if k != "cli")
        if others:
            out.unmapped.append(
                f"platform_toolsets for {', '.join(others)}: agentvisor has "
                "one toolset list (per session at run time); the cli list "
                "was used"
            )
    if not names:
        return
    result: list[str] = []
    dropped: list[str] = []
    for name in names:
        if name in TOOLSETS:
            result += TOOLSETS[name]
        elif name.startswith("hermes-") or name == "all":
            result += COMPOSITE
            out.mapped.append(
                f"toolsets: {name} -> file, terminal, web (the tools it has "
                "that agentvisor has too)"
            )
        elif name.startswith("no_"):
            continue
        else:
            dropped.append(name)
    chosen = sorted(set(result))
    out.config["toolsets"] = chosen
    sources = "/".join(k for k in ("toolsets", "platform_toolsets") if data.get(k))
    out.mapped.append(f"{sources}: {', '.join(names)} -> toolsets: {chosen}")
    if dropped:
        out.unmapped.append(f"toolsets without an agentvisor equivalent: {', '.join(dropped)}")


def _security(s: dict, out: Import) -> None:
    blocklist = _section(s, "website_blocklist")
    if blocklist.get("enabled", True):
        for domain in _list(blocklist, "domains", "security.website_blocklist.domains"):
            out.config.setdefault("rules", []).append(
                {
                    "decision": "deny",
                    "kind": "fetch",
                    "pattern": str(domain),
                    "reason": "imported from Hermes security.website_blocklist",
                }
            )
            out.mapped.append(f"security.website_blocklist: {domain} -> rules: deny fetch")
        if blocklist.get("shared_files"):
            out.unmapped.append(
                "security.website_blocklist.shared_files: read them and add "
                "deny fetch rules; agentvisor denies unlisted hosts anyway"
            )
    if s.get("allow_private_urls"):
        out.stricter.append(
            "security.allow_private_urls: true -> not imported (agentvisor "
            "reaches a private address only when an allow rule names that "
            "exact host)"
        )
    for key in sorted(set(s) - {"website_blocklist", "allow_private_urls"}):
        out.unmapped.append(f"security.{key}: no equivalent")


def _write_root(value: str | None, out: Import) -> None:
    if not value:
        out.stricter.append(
            "HERMES_WRITE_SAFE_ROOT unset (Hermes' file tools wrote anywhere "
            "but a denylist) -> agentvisor writes in the workspace and asks "
            "for anything else (files.write_roots to add places)"
        )
        return
    roots = [r for r in value.split(os.pathsep) if r]
    out.set("files.write_roots", roots)
    out.mapped.append(
        f"HERMES_WRITE_SAFE_ROOT -> files.write_roots: {', '.join(roots)} "
        "(protected paths stay protected inside them)"
    )
