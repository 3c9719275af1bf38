"""Configuration: where the file is looked up, strict validation, and the defaults.

The schema is `agentvisor.config.schema`: pydantic models whose fields carry each key's
type, default, range and description (docs/configuration.md is tested against them).
Reading a file validates it against them (unknown keys, wrong types and bad values are
errors naming the file and the key path). Importing pydantic costs tens of milliseconds,
which every ``agentvisor exec`` would pay; so with no config file, `defaults` gives the
schema's defaults from a cache the schema wrote, and this module imports neither pydantic
nor YAML. The schema's classes are importable from here too (loaded on first use).

Every key is documented in ``docs/configuration.md``; a test keeps the two in step.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import paths
from ..errors import ConfigError
from ..protected import parse_mount

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from typing import Any

    from pydantic import BaseModel
    from pydantic_core import ErrorDetails

    from .schema import (
        ApprovalsConfig,
        ApprovalsLLMConfig,
        AuditConfig,
        Config,
        DashboardConfig,
        DockerConfig,
        FilesConfig,
        FlowConfig,
        FlowRuleConfig,
        FlowScopeConfig,
        GatewayConfig,
        NetworkConfig,
        PolicyCategoriesConfig,
        PolicyConfig,
        PolicyDefaultsConfig,
        RuleConfig,
        RuleWhenConfig,
        SandboxConfig,
        SecretConfig,
        StateConfig,
        UpstreamConfig,
        WasmConfig,
        WebhooksConfig,
        WebSearchConfig,
    )
    from .yamlfile import Document

__all__ = [
    "TOOLSET_NAMES",
    "ApprovalsConfig",
    "ApprovalsLLMConfig",
    "AuditConfig",
    "Config",
    "DashboardConfig",
    "DockerConfig",
    "FilesConfig",
    "FlowConfig",
    "FlowRuleConfig",
    "FlowScopeConfig",
    "GatewayConfig",
    "NetworkConfig",
    "PolicyCategoriesConfig",
    "PolicyConfig",
    "PolicyDefaultsConfig",
    "RuleConfig",
    "RuleWhenConfig",
    "SandboxConfig",
    "SecretConfig",
    "StateConfig",
    "UpstreamConfig",
    "WasmConfig",
    "WebSearchConfig",
    "WebhooksConfig",
    "config_from_dict",
    "defaults",
    "load_config",
    "load_config_file",
    "operator_file",
    "parse_yaml",
    "project_file",
    "read_yaml",
]

TOOLSET_NAMES = (
    "file",
    "terminal",
    "web",
    "http",
    "safe",
    "debugging",
    "wasm",
    "upstreams",
    "all",
)


def __getattr__(name: str) -> Any:
    """The schema's classes, imported (with pydantic) only when something uses them."""
    if name.endswith("Config"):
        from . import schema

        return getattr(schema, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


PROJECT_FILE = "agentvisor.yaml"
SYSTEM_CONFIG = Path("/etc/agentvisor/config.yaml")


def operator_file(
    explicit: str | os.PathLike[str] | None = None,
    *,
    cwd: str | None = None,
    environ: dict[str, str] | None = None,
) -> Path | None:
    """The operator's own config, which is trusted: ``--config FILE``, else the user's XDG
    config file, else ``/etc/agentvisor/config.yaml``.

    ``cwd`` and ``environ`` describe the caller when it is another process (the exec server
    answering a CLI)."""
    if explicit is not None:
        path = Path(cwd or ".") / explicit
        if not path.is_file():
            raise ConfigError(f"{explicit}: config file not found")
        return path
    for candidate in (paths.user_config_file(environ), SYSTEM_CONFIG):
        if candidate.is_file():
            return candidate
    return None


def project_file(cwd: str | None = None) -> Path | None:
    """``agentvisor.yaml`` in the current directory or the nearest parent that has one: a
    file where the agent may write, so it is not trusted (see `load_config`)."""
    here = Path(os.path.abspath(cwd or "."))
    for directory in (here, *here.parents):
        candidate = directory / PROJECT_FILE
        if candidate.is_file():  # a sandbox's read-only stand-in is a directory
            return candidate
    return None


def load_config(
    explicit: str | os.PathLike[str] | None = None,
    *,
    cwd: str | None = None,
    environ: dict[str, str] | None = None,
) -> Config:
    """The config that applies here: the operator's file (the secure defaults without one)
    and over it, unless ``--config`` was given, the project file.

    A project file the operator did not trust (`agentvisor trust`) may only narrow what the
    operator's config allows; one that widens anything is refused, naming key and file."""
    operator = operator_file(explicit, cwd=cwd, environ=environ)
    project = None if explicit is not None else project_file(cwd)
    if project is not None:
        return _with_project(operator, project)
    return load_config_file(operator) if operator is not None else defaults()


def load_config_file(path: Path) -> Config:
    document = read_yaml(path)
    # Absolute, so the file is named the same way wherever it is looked up (approvals
    # offer it for "always" rules).
    return config_from_dict(document.data, source=os.path.abspath(path), document=document)


def _with_project(operator: Path | None, project: Path) -> Config:
    from . import trust
    from .narrowing import widenings
    from .schema import Config

    base_data = read_yaml(operator).data if operator is not None else {}
    base = load_config_file(operator) if operator is not None else Config()
    content = _read(project)  # hashed and parsed: the same bytes
    document = parse_yaml(content, project)
    data = document.data
    # Its own errors name it (and their lines).
    config_from_dict(data, source=os.path.abspath(project), document=document)
    merged_data = _merge(base_data, _named_rules(data, project), Config)
    merged = config_from_dict(merged_data, source=os.path.abspath(project))
    merged = merged.model_copy(update={"source": base.source})
    if trust.is_trusted(project, content):
        return merged
    problems = widenings(base, merged)
    if problems:
        against = base.source or "the built-in defaults"
        raise ConfigError(
            f"{project}: a project file may only narrow the operator's configuration "
            f"({against}); this one widens it:\n  "
            + "\n  ".join(problems)
            + f"\nIf you trust this file, run: agentvisor trust {os.path.abspath(project)}"
        )
    return merged


def _named_rules(data: dict[str, Any], project: Path) -> dict[str, Any]:
    """The project's rules named after the project file (once merged, their position in
    the list is no longer theirs)."""
    rules = data.get("rules")
    if not isinstance(rules, list):
        return data
    named = [
        {"id": f"{os.path.abspath(project)} rules[{index}]", **rule}
        for index, rule in enumerate(rules)
    ]
    return {**data, "rules": named}


def _merge(base: dict[str, Any], over: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """``over`` laid over ``base``: sections key by key; lists of restrictions and rules
    extended (a project adds to them); every other value replaced."""
    from .narrowing import RESTRICTS, RULES

    out = dict(base)
    for key, value in over.items():
        field = model.model_fields[key]
        section = _section_type(field.annotation)
        kept = out.get(key)
        if isinstance(value, dict) and isinstance(kept, dict) and section is not None:
            out[key] = _merge(kept, value, section)
        elif (
            isinstance(value, list)
            and isinstance(kept, list)
            and (RESTRICTS in field.metadata or RULES in field.metadata)
        ):
            out[key] = [*kept, *value]
        else:
            out[key] = value
    return out


def _read(path: Path, what: str = "") -> bytes:
    """The file's bytes, never more than `yamlfile.MAX_BYTES` + 1 (which `parse_yaml`
    refuses)."""
    from .yamlfile import read_limited

    try:
        return read_limited(path)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read{what}: {exc.strerror}") from exc


def read_yaml(path: Path, what: str = "") -> Document:
    """A YAML file's data ({} when it is empty) and lines; errors name the file (and
    ``what`` it is)."""
    return parse_yaml(_read(path, what), path)


def parse_yaml(content: bytes, path: Path) -> Document:
    """YAML text read from ``path`` (`yamlfile.load_yaml`: duplicate keys are errors)."""
    from .yamlfile import load_yaml

    return load_yaml(content, path)


def config_from_dict(
    data: Any, source: str = "<config>", document: Document | None = None
) -> Config:
    """Validate a parsed config mapping; every problem is reported with its key path (and
    its line, given the ``document`` it was read from)."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of keys, not {_kind(data)}")
    import json

    from pydantic import ValidationError

    from .schema import Config

    if "source" in data:
        raise ConfigError(f"{source}: unknown key 'source' (accepted: {_accepted(Config)})")
    try:
        # Strict mode accepts mappings for nested sections only from JSON input; YAML
        # scalars JSON cannot hold (dates) become strings and are judged as such.
        config = Config.model_validate_json(json.dumps(data, default=str))
    except ValidationError as exc:
        raise ConfigError(_format_errors(source, exc.errors(), document)) from None
    config = config.model_copy(update={"source": source})
    try:
        _check_semantics(config, source)
    except ConfigError as exc:
        raise ConfigError(_with_line(str(exc), source, document)) from None
    return config


def _with_line(message: str, source: str, document: Document | None) -> str:
    """``SOURCE: KEY: why`` with the line of KEY in the file, when it is known."""
    import re

    if document is None or not message.startswith(f"{source}: "):
        return message
    key, colon, why = message[len(source) + 2 :].partition(": ")
    path = tuple(int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", key))
    line = document.line_of(path)
    return f"{source}: line {line}: {key}: {why}" if colon and line is not None else message


def defaults() -> Config:
    """The built-in defaults (`schema.Config()`), without importing pydantic.

    The schema writes its defaults to a cache file named after a hash of its own source
    and the platform, once; later calls read that file. What they return has the
    attributes of a `Config` and its sections (and `model_copy(update=...)`), nothing
    else."""
    import json
    import sys
    import zlib  # a checksum is enough to tell schema versions apart (hashlib costs ms)

    schema_file = Path(__file__).with_name("schema.py")
    key = zlib.crc32(schema_file.read_bytes() + sys.platform.encode())
    cached = paths.cache_dir() / f"config-defaults-{key:08x}.json"
    try:
        values = json.loads(cached.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        from .schema import Config

        values = Config().model_dump(mode="json")
        _write_quietly(cached, json.dumps(values))
    # `source` is not a key, so not in the dump: None marks the built-in defaults.
    return Values({**values, "source": None})  # type: ignore[return-value]  # a Config's stand-in


def _write_quietly(path: Path, text: str) -> None:
    """Write the defaults cache, atomically; a cache that cannot be written is skipped
    (the next run computes the defaults again)."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False) as tmp:
            tmp.write(text)
        os.replace(tmp.name, path)
    except OSError:
        pass


class Values:
    """A frozen view of a dumped config: each key an attribute, each section a view too.
    Stands in for the schema's models where no file was read (see `defaults`)."""

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name: str) -> Any:
        try:
            value = self._data[name]
        except KeyError:
            raise AttributeError(name) from None
        if isinstance(value, dict):
            return Values(value)
        return list(value) if isinstance(value, list) else value

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"the configuration is read-only: cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Values) and self._data == other._data

    __hash__ = None  # type: ignore[assignment]  # holds lists, as the models do

    def __repr__(self) -> str:
        return f"Values({self._data!r})"

    def model_copy(self, *, update: dict[str, Any]) -> Values:
        return Values({**self._data, **update})

    def model_dump(self) -> dict[str, Any]:
        return {key: value for key, value in self._data.items() if key != "source"}


def _check_semantics(config: Config, source: str) -> None:
    """Checks a type cannot express: ranges and the shape of mount specs."""
    sb = config.sandbox
    user = sb.docker.user
    if user != "auto" and not all(part.isdigit() for part in user.split(":", 1)):
        raise ConfigError(
            f"{source}: sandbox.docker.user: must be auto, UID or UID:GID (numbers), got {user!r}"
        )
    for index, spec in enumerate(sb.mounts):
        try:
            parse_mount(spec)
        except ValueError as exc:
            raise ConfigError(f"{source}: sandbox.mounts[{index}]: {exc}") from None
    for index, rel in enumerate(sb.readonly_paths):
        _check_workspace_relative(rel, f"{source}: sandbox.readonly_paths[{index}]")
    for index, name in enumerate(config.toolsets):
        if name not in TOOLSET_NAMES:
            raise ConfigError(
                f"{source}: toolsets[{index}]: unknown toolset {name!r} "
                f"(accepted: {', '.join(TOOLSET_NAMES)})"
            )
    _check_network(config, source)
    _check_dashboard(config, source)
    _check_upstreams(config, source)
    from ..policy.rules import check_config

    check_config(config, source)


def _check_workspace_relative(rel: str, where: str) -> None:
    """A path inside the workspace, relative to it. Each entry becomes a read-only mount
    in the sandbox, its parent directories writable self-binds and, while missing, a stand-in
    made on the host: ``../`` would make a directory outside the workspace writable inside
    and create files outside it, so it is refused (a project file may add entries)."""
    parts = rel.rstrip("/").split("/")
    if not rel or rel.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ConfigError(
            f"{where}: {rel!r} must be a path inside the workspace, relative to it, "
            "without '.', '..' or empty parts"
        )


def _check_upstreams(config: Config, source: str) -> None:
    """The upstreams section (docs/upstreams.md): one kind per server, unique names."""
    names: set[str] = set()
    for index, server in enumerate(config.upstreams):
        where = f"{source}: upstreams[{index}]"
        if server.name in names:
            raise ConfigError(f"{where}.name: {server.name!r} is used twice")
        names.add(server.name)
        if bool(server.command) == bool(server.url):
            raise ConfigError(f"{where}: set exactly one of command (stdio) or url (HTTP)")
        if server.url is not None and not server.url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}.url: must be an http:// or https:// URL")
        for m, spec in enumerate(server.mounts):
            try:
                parse_mount(spec)
            except ValueError as exc:
                raise ConfigError(f"{where}.mounts[{m}]: {exc}") from None


def _check_network(config: Config, source: str) -> None:
    """The network, secrets and web_search sections (docs/network.md)."""
    import ipaddress
    import re

    net = config.network
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
    hooks = config.webhooks
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


def _format_errors(
    source: str, errors: list[ErrorDetails], document: Document | None = None
) -> str:
    lines = [f"{source}: invalid configuration"]
    for err in errors:
        loc = [str(p) for p in err["loc"] if not str(p).startswith("function-")]
        line = document.line_of(tuple(err["loc"])) if document is not None else None
        key = f"line {line}: {_key_path(loc)}" if line is not None else _key_path(loc)
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


def _section_at(loc: list[str]) -> type[BaseModel] | None:
    """The section (model class) at a key path, None when the path is not a section."""
    from .schema import Config

    cls: type[BaseModel] | None = Config
    for part in loc:
        if cls is None:
            return None
        if part.isdigit():  # an entry of a list of sections: the section itself
            continue
        field = cls.model_fields.get(part)
        cls = _section_type(field.annotation) if field is not None else None
    return cls


def _section_type(annotation: Any) -> type[BaseModel] | None:
    """The model class a field holds (also inside ``X | None`` or ``list[X]``)."""
    from typing import get_args

    from pydantic import BaseModel

    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    sections = [arg for arg in get_args(annotation) if _section_type(arg) is not None]
    return _section_type(sections[0]) if sections else None


def _accepted(cls: type[BaseModel]) -> str:
    return ", ".join(name for name in cls.model_fields if name != "source")


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
