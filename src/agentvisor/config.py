"""Configuration: the schema, where the file is looked up, and strict validation.

The schema is a tree of frozen records (`records.Declared`, declared like dataclasses but
without the import cost). To validate a YAML file, pydantic checks it against stdlib
dataclasses that mirror those records, built once on first use (unknown keys, wrong
types and bad values are errors naming the file and the key path). With no config file
the defaults are built directly, so commands such as ``agentvisor exec`` start without
importing pydantic, YAML, dataclasses or typing at all.

Every key is documented in ``docs/configuration.md``; a test keeps the two in step.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path

from . import paths
from .errors import ConfigError
from .records import Declared, Default, _Factory, replace

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    import datetime
    from typing import Any, Literal, TypeAlias

# pydantic reads this from each mirror dataclass; a plain dict keeps pydantic out of the import.
_STRICT = {"extra": "forbid", "strict": True}

# Aliases in the annotations, as text like the annotations themselves: only validating a
# file evaluates them (see _type_names).
_VERDICT: TypeAlias = 'Literal["allow", "ask", "deny"]'
_DAY: TypeAlias = 'Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]'


def _default_backend() -> str:
    return "bwrap" if sys.platform.startswith("linux") else "local"


class DockerConfig(Declared):
    """The docker backend's own settings (docs/docker.md)."""

    image: str = "agentvisor-sandbox:latest"
    user: str = "auto"
    read_only_root: bool = True
    cpus: float = 1.0
    disk_mb: int | None = None
    extra_args: list[str] = Default(factory=list)


class SandboxConfig(Declared):
    backend: Literal["bwrap", "local", "docker"] = Default(factory=_default_backend)
    network: Literal["none", "proxy"] = "none"
    workspace: str | None = None
    mounts: list[str] = Default(factory=list)
    memory_mb: int = 4096
    pids: int = 256
    cpu_seconds: int | None = None
    file_size_mb: int = 4096
    tmp_size_mb: int = 512
    disk_mb: int | None = None
    timeout: float = 180.0
    env_passthrough: list[str] = Default(factory=list)
    env_passthrough_secrets: list[str] = Default(factory=list)
    protected_paths: list[str] = Default(factory=list)
    readonly_paths: list[str] = Default(factory=list)
    allow_unenforced_limits: bool = False
    persistent: bool = True
    idle_timeout: float = 1800.0
    docker: DockerConfig = Default(factory=DockerConfig)


class ApprovalsLLMConfig(Declared):
    """An OpenAI-compatible endpoint for the smart-mode LLM judge (docs/policy.md)."""

    url: str
    model: str
    api_key_env: str | None = None
    timeout: float = 20.0


class ApprovalsConfig(Declared):
    mode: Literal["manual", "smart", "off"] = "manual"
    timeout: float = 300.0
    unattended: Literal["deny"] = "deny"
    judge: Literal["rules", "llm"] = "rules"
    llm: ApprovalsLLMConfig | None = None


class RuleWhenConfig(Declared):
    """Conditions on the context a rule applies in; glob patterns (docs/policy.md)."""

    session: str | list[str] | None = None
    agent: str | list[str] | None = None
    toolset: str | list[str] | None = None
    tool: str | list[str] | None = None
    time: str | None = None  # "HH:MM-HH:MM", local time
    days: list[_DAY] | None = None


class RuleConfig(Declared):
    """One entry of ``rules:`` (docs/policy.md)."""

    decision: _VERDICT
    kind: Literal["exec", "read", "write", "fetch", "secret", "tool"]
    pattern: str
    id: str | None = None
    when: RuleWhenConfig | None = None
    methods: list[str] | None = None
    expires: datetime.datetime | datetime.date | str | None = None
    reason: str | None = None


class PolicyCategoriesConfig(Declared):
    """Each built-in category on (true) or off (false) (docs/policy.md)."""

    delete_system: bool = True
    disk_format: bool = True
    block_device_write: bool = True
    fork_bomb: bool = True
    power: bool = True
    kill_all: bool = True
    chmod_system: bool = True
    download_exec: bool = True
    credentials: bool = True
    exfiltration: bool = True
    persistence: bool = True
    privilege: bool = True
    vcs_destructive: bool = True
    private_network: bool = True
    dynamic_code: bool = True


class PolicyDefaultsConfig(Declared):
    """What a kind gets when no rule, grant or category decided (docs/policy.md)."""

    exec: _VERDICT = "allow"
    read: _VERDICT = "allow"
    write: _VERDICT = "ask"  # outside the workspace and files.write_roots
    secret: _VERDICT = "ask"
    tool: _VERDICT = "ask"


class PolicyConfig(Declared):
    categories: PolicyCategoriesConfig = Default(factory=PolicyCategoriesConfig)
    defaults: PolicyDefaultsConfig = Default(factory=PolicyDefaultsConfig)


class NetworkConfig(Declared):
    """Caps and extra blocks for every host-side network path (docs/network.md)."""

    max_response_bytes: int = 10 * 1024 * 1024
    timeout: float = 30.0
    max_redirects: int = 5
    ca_file: str | None = None
    block: list[str] = Default(factory=list)
    proxy_port: int = 3128


class SecretConfig(Declared):
    name: str
    hosts: list[str]
    env: str | None = None
    file: str | None = None
    header: str | None = None


class WebSearchConfig(Declared):
    provider: Literal["none", "searxng", "brave"] = "none"
    url: str | None = None
    api_key_secret: str | None = None
    max_results: int = 10


class FilesConfig(Declared):
    """Where the file tools may read and write, besides the workspace (docs/gateway.md)."""

    write_roots: list[str] = Default(factory=list)
    read_roots: list[str] = Default(factory=list)
    max_read_bytes: int = 1024 * 1024
    max_write_bytes: int = 10 * 1024 * 1024


class GatewayConfig(Declared):
    """The MCP gateway: what agents see and how results come back (docs/gateway.md)."""

    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    max_output_bytes: int = 50_000
    # Seconds the helper `agentvisor exec` starts waits for the next run; 0: none.
    exec_helper_idle: float = 600.0


class AuditConfig(Declared):
    """Where the audit log is kept and for how long (docs/audit.md)."""

    url: str | None = None  # None: sqlite:/// file state.db under the XDG state directory
    retention_days: float | None = None  # None: keep every event


class StateConfig(Declared):
    """Where grants and pending approvals are kept, shared by gateways (docs/audit.md)."""

    url: str | None = None  # None: the same database as audit.url


class WasmConfig(Declared):
    """Ceilings on what any Wasm tool gets, whatever its manifest asks (docs/wasm.md)."""

    max_memory_mb: int = 256
    max_timeout: float = 60.0
    max_output_kb: int = 1024


class DashboardConfig(Declared):
    """The web dashboard `agentvisor serve` shows on its own port (docs/dashboard.md)."""

    enabled: bool = True
    login: Literal["auto", "always"] = "auto"
    token: str | None = None
    login_hours: float = 12.0


class WebhooksConfig(Declared):
    """Approvals through signed webhooks, e.g. a chat bot (docs/dashboard.md)."""

    targets: list[str] = Default(factory=list)
    secret_env: str | None = None
    secret_file: str | None = None
    approvers: list[str] = Default(factory=list)
    callback_url: str | None = None
    max_age: float = 300.0
    timeout: float = 10.0


TOOLSET_NAMES = ("file", "terminal", "web", "http", "safe", "debugging", "wasm", "all")


class Config(Declared):
    sandbox: SandboxConfig = Default(factory=SandboxConfig)
    approvals: ApprovalsConfig = Default(factory=ApprovalsConfig)
    files: FilesConfig = Default(factory=FilesConfig)
    gateway: GatewayConfig = Default(factory=GatewayConfig)
    toolsets: list[str] = Default(factory=lambda: ["debugging"])
    network: NetworkConfig = Default(factory=NetworkConfig)
    secrets: list[SecretConfig] = Default(factory=list)
    web_search: WebSearchConfig = Default(factory=WebSearchConfig)
    policy: PolicyConfig = Default(factory=PolicyConfig)
    rules: list[RuleConfig] = Default(factory=list)
    wasm: WasmConfig = Default(factory=WasmConfig)
    audit: AuditConfig = Default(factory=AuditConfig)
    state: StateConfig = Default(factory=StateConfig)
    dashboard: DashboardConfig = Default(factory=DashboardConfig)
    webhooks: WebhooksConfig = Default(factory=WebhooksConfig)
    # Not a key: the file this config came from (None for built-in defaults).
    source: str | None = None

    _uncompared = ("source",)


def find_config_file(
    explicit: str | os.PathLike[str] | None = None,
    *,
    cwd: str | None = None,
    environ: dict[str, str] | None = None,
) -> Path | None:
    """``--config FILE``, else ``./agentvisor.yaml``, else the user's XDG config file.

    ``cwd`` and ``environ`` describe the caller when it is another process (the exec server
    answering a CLI)."""
    if explicit is not None:
        path = Path(cwd or ".") / explicit
        if not path.is_file():
            raise ConfigError(f"{explicit}: config file not found")
        return path
    for candidate in paths.config_candidates(cwd, environ):
        if candidate.is_file():
            return candidate
    return None


def load_config(
    explicit: str | os.PathLike[str] | None = None,
    *,
    cwd: str | None = None,
    environ: dict[str, str] | None = None,
) -> Config:
    """Load and validate the config that applies here; the secure defaults without a file."""
    path = find_config_file(explicit, cwd=cwd, environ=environ)
    if path is None:
        return Config()
    return load_config_file(path)


def load_config_file(path: Path) -> Config:
    data = read_yaml(path)
    # Absolute, so the file is named the same way wherever it is looked up (approvals
    # offer it for "always" rules).
    return config_from_dict(data, source=os.path.abspath(path))


def read_yaml(path: Path, what: str = "") -> Any:
    """A YAML file's data ({} when it is empty); errors name the file (and ``what`` it is)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read{what}: {exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    return {} if data is None else data


def config_from_dict(data: Any, source: str = "<config>") -> Config:
    """Validate a parsed config mapping; every problem is reported with its key path."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, not {_kind(data)}")
    if "source" in data:
        raise ConfigError(f"{source}: unknown key 'source' (accepted: {_accepted(Config)})")
    import json

    from pydantic import ValidationError

    adapter, records = _schema()
    try:
        # Strict mode accepts mappings for nested sections only from JSON input; YAML
        # scalars JSON cannot hold (dates) become strings and are judged as such.
        mirrored = adapter.validate_json(json.dumps(data, default=str))
    except ValidationError as exc:
        raise ConfigError(_format_errors(source, exc.errors())) from None
    config = replace(_record(mirrored, records), source=source)
    _check_semantics(config, source)
    return config


@functools.cache
def _schema() -> tuple[Any, dict[type, type]]:
    """pydantic's validator of stdlib dataclasses mirroring the config records (the same
    fields, types and defaults), and mirror -> record; built once, when a file is read."""
    import dataclasses

    from pydantic import TypeAdapter

    names = _type_names({})
    records: dict[type, type] = {}
    for cls in _sections():
        fields = [
            (name, eval(cls.__annotations__[name], names), _mirror_field(cls, name))
            for name in cls.__match_args__
        ]
        mirror = dataclasses.make_dataclass(
            cls.__name__,
            fields,
            frozen=True,
            namespace={"__pydantic_config__": _STRICT, "__module__": __name__},
        )
        names[cls.__name__] = mirror
        records[mirror] = cls
    return TypeAdapter(names["Config"]), records


def _mirror_field(cls: type[Declared], name: str) -> Any:
    import dataclasses

    default = cls._defaults.get(name, dataclasses.MISSING)
    if isinstance(default, _Factory):
        return dataclasses.field(default_factory=default.factory)
    return dataclasses.field(default=default)


def _record(value: Any, records: dict[type, type]) -> Any:
    """A validated mirror value as the config records it stands for (defaults pydantic
    filled in are records already)."""
    cls = records.get(type(value))
    if cls is not None:
        return cls(**{name: _record(getattr(value, name), records) for name in cls.__match_args__})
    if isinstance(value, list):
        return [_record(item, records) for item in value]
    return value


def _sections() -> list[type[Declared]]:
    """Config and its sections (the records here named ...Config) in definition order,
    which puts each after the sections it holds."""
    return [
        value
        for value in globals().values()
        if isinstance(value, type)
        and issubclass(value, Declared)
        and value.__name__.endswith("Config")
    ]


def _type_names(classes: dict[str, type]) -> dict[str, Any]:
    """What the annotations name (imports typing): ``Literal``, ``datetime``, the aliases,
    and the config classes as ``classes`` gives them."""
    import datetime
    from typing import Literal

    names: dict[str, Any] = {"Literal": Literal, "datetime": datetime, **classes}
    names["_VERDICT"] = eval(_VERDICT, names)
    names["_DAY"] = eval(_DAY, names)
    return names


def field_types(cls: type[Declared]) -> dict[str, Any]:
    """Each field of a config class and its type, with config classes as themselves (as
    `typing.get_type_hints` would give for a dataclass)."""
    names = _type_names({section.__name__: section for section in _sections()})
    return {name: eval(cls.__annotations__[name], names) for name in cls.__match_args__}


def _check_semantics(config: Config, source: str) -> None:
    """Checks a type cannot express: ranges and the shape of mount specs."""
    sb = config.sandbox
    positive = {
        "sandbox.memory_mb": sb.memory_mb,
        "sandbox.pids": sb.pids,
        "sandbox.file_size_mb": sb.file_size_mb,
        "sandbox.tmp_size_mb": sb.tmp_size_mb,
        "sandbox.timeout": sb.timeout,
        "approvals.timeout": config.approvals.timeout,
        "sandbox.idle_timeout": sb.idle_timeout,
        "files.max_read_bytes": config.files.max_read_bytes,
        "files.max_write_bytes": config.files.max_write_bytes,
        "gateway.max_output_bytes": config.gateway.max_output_bytes,
        "wasm.max_memory_mb": config.wasm.max_memory_mb,
        "wasm.max_timeout": config.wasm.max_timeout,
        "wasm.max_output_kb": config.wasm.max_output_kb,
    }
    if config.audit.retention_days is not None:
        positive["audit.retention_days"] = config.audit.retention_days
    if sb.cpu_seconds is not None:
        positive["sandbox.cpu_seconds"] = sb.cpu_seconds
    if sb.disk_mb is not None:
        positive["sandbox.disk_mb"] = sb.disk_mb
    positive["sandbox.docker.cpus"] = sb.docker.cpus
    if sb.docker.disk_mb is not None:
        positive["sandbox.docker.disk_mb"] = sb.docker.disk_mb
    user = sb.docker.user
    if user != "auto" and not all(part.isdigit() for part in user.split(":", 1)):
        raise ConfigError(
            f"{source}: sandbox.docker.user: must be auto, UID or UID:GID (numbers), got {user!r}"
        )
    for key, value in positive.items():
        if value <= 0:
            raise ConfigError(f"{source}: {key}: must be greater than 0, got {value}")
    if config.gateway.exec_helper_idle < 0:
        raise ConfigError(
            f"{source}: gateway.exec_helper_idle: must be 0 (no helper) or more, "
            f"got {config.gateway.exec_helper_idle}"
        )
    for index, spec in enumerate(sb.mounts):
        try:
            parse_mount(spec)
        except ValueError as exc:
            raise ConfigError(f"{source}: sandbox.mounts[{index}]: {exc}") from None
    for index, name in enumerate(config.toolsets):
        if name not in TOOLSET_NAMES:
            raise ConfigError(
                f"{source}: toolsets[{index}]: unknown toolset {name!r} "
                f"(accepted: {', '.join(TOOLSET_NAMES)})"
            )
    if not 0 < config.gateway.port < 65536:
        raise ConfigError(f"{source}: gateway.port: must be 1 to 65535, got {config.gateway.port}")
    _check_network(config, source)
    _check_dashboard(config, source)
    from .policy.rules import check_config

    check_config(config, source)


def _check_network(config: Config, source: str) -> None:
    """The network, secrets and web_search sections (docs/network.md)."""
    import ipaddress
    import re

    net = config.network
    for key, value in (("max_response_bytes", net.max_response_bytes), ("timeout", net.timeout)):
        if value <= 0:
            raise ConfigError(f"{source}: network.{key}: must be greater than 0, got {value}")
    if not 0 <= net.max_redirects <= 20:
        raise ConfigError(
            f"{source}: network.max_redirects: must be 0 to 20, got {net.max_redirects}"
        )
    if not 0 < net.proxy_port < 65536:
        raise ConfigError(f"{source}: network.proxy_port: must be 1 to 65535, got {net.proxy_port}")
    for index, cidr in enumerate(net.block):
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            raise ConfigError(
                f"{source}: network.block[{index}]: {cidr!r} is not an address or CIDR range"
            ) from None
    names = set()
    for index, secret in enumerate(config.secrets):
        where = f"{source}: secrets[{index}]"
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", secret.name):
            raise ConfigError(
                f"{where}.name: {secret.name!r} must be letters, digits, _ . - "
                "(it is written as {{secret:NAME}})"
            )
        if secret.name in names:
            raise ConfigError(f"{where}.name: {secret.name!r} is defined twice")
        names.add(secret.name)
        if (secret.env is None) == (secret.file is None):
            raise ConfigError(f"{where}: set exactly one of env or file")
        if not secret.hosts:
            raise ConfigError(f"{where}.hosts: list at least one host the secret may go to")
        if secret.header is not None and (
            ":" not in secret.header or "{value}" not in secret.header
        ):
            raise ConfigError(
                f"{where}.header: must look like 'Name: ...{{value}}...', got {secret.header!r}"
            )
    search = config.web_search
    if search.provider == "searxng" and not search.url:
        raise ConfigError(f"{source}: web_search.url: the searxng provider needs the instance URL")
    if search.provider == "brave" and search.api_key_secret not in names:
        raise ConfigError(
            f"{source}: web_search.api_key_secret: the brave provider needs "
            "the name of a secret defined under secrets:"
        )


def _check_dashboard(config: Config, source: str) -> None:
    """The dashboard and webhooks sections: a webhook needs a secret and named approvers."""
    from urllib.parse import urlsplit

    token = config.dashboard.token
    if token is not None and (len(token) < 16 or token == config.gateway.token):
        raise ConfigError(
            f"{source}: dashboard.token: use at least 16 characters, and not "
            "gateway.token (agents hold that one)"
        )
    if config.dashboard.login_hours <= 0:
        raise ConfigError(
            f"{source}: dashboard.login_hours: must be greater than 0, "
            f"got {config.dashboard.login_hours}"
        )
    hooks = config.webhooks
    for key in ("max_age", "timeout"):
        if getattr(hooks, key) <= 0:
            raise ConfigError(
                f"{source}: webhooks.{key}: must be greater than 0, got {getattr(hooks, key)}"
            )
    urls = [(f"webhooks.targets[{i}]", u) for i, u in enumerate(hooks.targets)]
    if hooks.callback_url is not None:
        urls.append(("webhooks.callback_url", hooks.callback_url))
    for key, url in urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"{source}: {key}: {url!r} is not an http(s) URL")
    for index, who in enumerate(hooks.approvers):
        # Identities are compared exactly: there is no pattern, so no "everyone".
        if not who.strip() or who != who.strip() or any(c in who for c in "*?[]"):
            raise ConfigError(
                f"{source}: webhooks.approvers[{index}]: {who!r} must be one "
                "exact identity (no wildcards, no surrounding spaces)"
            )
    if not hooks.targets:
        return
    if (hooks.secret_env is None) == (hooks.secret_file is None):
        raise ConfigError(
            f"{source}: webhooks: set exactly one of secret_env or secret_file "
            "(the HMAC key both sides sign with)"
        )
    if not hooks.approvers:
        raise ConfigError(
            f"{source}: webhooks.approvers: list the identities allowed to "
            "answer (there is no allow-everyone setting)"
        )


class Mount(Declared):
    host: Path
    inside: Path
    writable: bool


def parse_mount(spec: str) -> Mount:
    """``HOST:INSIDE[:ro|rw]``; read-only unless ``rw`` is written."""
    parts = spec.split(":")
    if len(parts) not in (2, 3):
        raise ValueError(f"{spec!r} is not HOST:INSIDE[:ro|rw]")
    mode = parts[2] if len(parts) == 3 else "ro"
    if mode not in ("ro", "rw"):
        raise ValueError(f"{spec!r}: mode must be 'ro' or 'rw', not {mode!r}")
    host = Path(os.path.expanduser(parts[0]))
    inside = Path(parts[1])
    if not host.is_absolute() or not inside.is_absolute():
        raise ValueError(f"{spec!r}: both paths must be absolute (or start with ~/ on the host)")
    return Mount(
        host=Path(os.path.normpath(host)),
        inside=Path(os.path.normpath(inside)),
        writable=mode == "rw",
    )


def _format_errors(source: str, errors: list[dict[str, Any]]) -> str:
    lines = [f"{source}: invalid configuration"]
    for err in errors:
        loc = [str(p) for p in err["loc"] if not str(p).startswith("function-")]
        key = _key_path(loc)
        if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
            parent = _section_at(loc[:-1])
            accepted = _accepted(parent) if parent else "none"
            lines.append(f"  {key}: unknown key (accepted here: {accepted})")
        elif err["type"] == "literal_error":
            lines.append(f"  {key}: {err['msg']}, got {err.get('input')!r}")
        else:
            lines.append(
                f"  {key}: {err['msg']}, got {_kind(err.get('input'))} {err.get('input')!r}"
            )
    return "\n".join(lines)


def _key_path(loc: list[str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if part.isdigit() else (f".{part}" if out else part)
    return out or "(top level)"


def _section_at(loc: list[str]) -> type | None:
    cls: Any = Config
    for part in loc:
        if part.isdigit() or not _is_section(cls):
            return None
        cls = field_types(cls).get(part)
    return cls if _is_section(cls) else None


def _is_section(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, Declared)


def _accepted(cls: type[Declared]) -> str:
    return ", ".join(name for name in cls.__match_args__ if name != "source")


def _kind(value: Any) -> str:
    return {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "nothing",
    }.get(type(value), "a value")
