"""A Wasm tool's manifest (``tool.yaml``): what the tool is, and what it asks to be given.

The manifest names the tool, its version and description, its module file, the functions
it exports with a JSON Schema for each one's arguments, the capabilities it requests and
its limits. Nothing in it is granted by being written down: ``agentvisor tool install``
shows the requests to the operator, and only an accepted manifest is installed (its
SHA-256 goes into the lock file with the module's). The schema is strict, like the
config's: an unknown key or a wrong type is an error naming the key.

Capabilities (everything else is denied):

- ``files``: directories below the workspace, each ``read`` or ``write``; the tool sees
  the workspace at ``/workspace`` and only these directories in it;
- ``network``: hosts (``api.example.com``, ``host:port``, ``*.example.com``) it may send
  requests to through the host function ``agentvisor.http_request``, each request also
  judged by the network policy;
- ``env``: names of environment variables it may read;
- ``secrets``: names of configured secrets it may use as ``{{secret:NAME}}`` placeholders
  in those requests (the value never enters the tool).
"""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..protected import RUNS_CODE_LATER
from .errors import ManifestError

MANIFEST_FILE = "tool.yaml"
GUEST_WORKSPACE = "/workspace"

NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,31}")
FUNCTION_RE = re.compile(r"[a-z][a-z0-9_]{0,31}")
ENV_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
SECRET_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
MODULE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\.wasm")
_LABEL = r"(?!-)[a-z0-9-]{1,63}(?<!-)"
HOST_RE = re.compile(rf"(\*\.)?{_LABEL}(\.{_LABEL})*(:\d{{1,5}})?|\[[0-9a-f:.]+\](:\d{{1,5}})?")
# Exports the ABI itself uses; a function may not take these names.
RESERVED = frozenset({"memory", "av_alloc", "_initialize", "_start"})
# Ceilings of what a manifest may ask for at all (the config can only lower them).
MAX_MEMORY_MB = 4096  # all a 32-bit linear memory can address
MAX_TIMEOUT = 3600.0
MAX_OUTPUT_KB = 64 * 1024
# Unknown keys and wrong types are errors; a manifest never changes once read.
_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)


class FileGrant(BaseModel):
    model_config = _STRICT

    path: str
    access: Literal["read", "write"] = "read"

    @property
    def guest_path(self) -> str:
        return GUEST_WORKSPACE if self.path == "." else f"{GUEST_WORKSPACE}/{self.path}"


class Capabilities(BaseModel):
    model_config = _STRICT

    files: list[FileGrant] = Field(default_factory=list)
    network: list[str] = Field(default_factory=list)
    env: list[str] = Field(default_factory=list)
    secrets: list[str] = Field(default_factory=list)


class Limits(BaseModel):
    model_config = _STRICT

    memory_mb: int = 16
    timeout: float = 10.0
    output_kb: int = 256


class Function(BaseModel):
    model_config = _STRICT

    name: str
    description: str
    input_schema: dict[str, Any]


class Manifest(BaseModel):
    model_config = _STRICT

    name: str
    version: str
    description: str
    functions: list[Function]
    module: str = "tool.wasm"
    capabilities: Capabilities = Field(default_factory=Capabilities)
    limits: Limits = Field(default_factory=Limits)

    def function(self, name: str) -> Function | None:
        return next((f for f in self.functions if f.name == name), None)


def parse_manifest(text: bytes, source: str) -> Manifest:
    """Validate a manifest's YAML; every problem names the file and the key."""
    from pydantic import ValidationError

    from ..config.yamlfile import load_yaml

    document = load_yaml(text, source, ManifestError)
    data = document.data
    if not isinstance(data, dict):
        raise ManifestError(f"{source}: the manifest must be a mapping of keys")
    try:
        manifest = Manifest.model_validate_json(json.dumps(data, default=str))
    except ValidationError as exc:
        lines = [f"{source}: invalid manifest"]
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
            line = document.line_of(tuple(err["loc"]))
            where = f"line {line}: {key}" if line is not None else key or "(top level)"
            unknown = err["type"] in ("extra_forbidden", "unexpected_keyword_argument")
            lines.append(f"  {where}: {'unknown key' if unknown else err['msg']}")
        raise ManifestError("\n".join(lines)) from None
    _check(manifest, source)
    return manifest


def _check(m: Manifest, source: str) -> None:
    """What the types cannot say: names, paths, hosts, ranges."""

    def fail(key: str, why: str) -> ManifestError:
        return ManifestError(f"{source}: {key}: {why}")

    if not NAME_RE.fullmatch(m.name):
        raise fail(
            "name",
            f"{m.name!r}: use 1-32 lower-case letters, digits and '-', starting with a letter",
        )
    if not m.version or len(m.version) > 64 or not m.version.isprintable() or " " in m.version:
        raise fail("version", f"{m.version!r} is not a version")
    if not m.description.strip() or len(m.description) > 2000:
        raise fail("description", "say what the tool does, in at most 2000 characters")
    if not MODULE_RE.fullmatch(m.module):
        raise fail("module", f"{m.module!r}: a .wasm file name in the tool's directory")
    if not m.functions:
        raise fail("functions", "list at least one function")
    seen: set[str] = set()
    for i, fn in enumerate(m.functions):
        key = f"functions[{i}]"
        if not FUNCTION_RE.fullmatch(fn.name) or fn.name in RESERVED:
            raise fail(
                f"{key}.name",
                f"{fn.name!r}: use 1-32 lower-case letters, digits "
                "and '_', starting with a letter (not memory, av_alloc, _initialize)",
            )
        if fn.name in seen:
            raise fail(f"{key}.name", f"{fn.name!r} is listed twice")
        seen.add(fn.name)
        if not fn.description.strip():
            raise fail(f"{key}.description", "say what the function does")
        if fn.input_schema.get("type") != "object":
            raise fail(f"{key}.input_schema", "must be a JSON Schema with type: object")
        problem = schema_problem(fn.input_schema)
        if problem:
            raise fail(f"{key}.input_schema", problem)
    _check_capabilities(m.capabilities, fail)
    _check_limits(m.limits, fail)


def _check_capabilities(caps: Capabilities, fail: Any) -> None:
    paths: set[str] = set()
    for i, grant in enumerate(caps.files):
        key = f"capabilities.files[{i}].path"
        normal = normalise_path(grant.path)
        if normal is None:
            raise fail(
                key,
                f"{grant.path!r}: a relative path inside the workspace, without "
                "'..' (such as '.', 'docs' or 'data/in')",
            )
        if normal != grant.path:
            raise fail(key, f"write it as {normal!r}")
        if normal in paths:
            raise fail(key, f"{normal!r} is listed twice")
        paths.add(normal)
        if grant.access == "write":
            clash = runs_code_later(normal)
            if clash:
                raise fail(
                    key,
                    f"write access to {normal!r} would include {clash}, which "
                    "makes the host run code later; grant write to a subdirectory",
                )
    for i, host in enumerate(caps.network):
        if not HOST_RE.fullmatch(host) or (host.startswith("*.") and host.count(".") < 2):
            raise fail(
                f"capabilities.network[{i}]",
                f"{host!r}: a lower-case host name, "
                "host:port or *.domain.tld (no scheme, no path, no bare wildcard)",
            )
        after_address = host.rpartition("]")[2]  # an IPv6 literal's colons are no port
        _, colon, port = after_address.rpartition(":")
        if colon and not 1 <= int(port) <= 65535:
            raise fail(f"capabilities.network[{i}]", f"{host!r}: port {port} is not 1 to 65535")
    for kind, pattern, names in (("env", ENV_RE, caps.env), ("secrets", SECRET_RE, caps.secrets)):
        for i, name in enumerate(names):
            if not pattern.fullmatch(name):
                raise fail(f"capabilities.{kind}[{i}]", f"{name!r} is not a valid name")
        if len(set(names)) != len(names):
            raise fail(f"capabilities.{kind}", "a name is listed twice")


def _check_limits(limits: Limits, fail: Any) -> None:
    if not 1 <= limits.memory_mb <= MAX_MEMORY_MB:
        raise fail("limits.memory_mb", f"must be 1 to {MAX_MEMORY_MB}")
    if not 0 < limits.timeout <= MAX_TIMEOUT:
        raise fail("limits.timeout", f"seconds, greater than 0 and at most {MAX_TIMEOUT:g}")
    if not 1 <= limits.output_kb <= MAX_OUTPUT_KB:
        raise fail("limits.output_kb", f"must be 1 to {MAX_OUTPUT_KB}")


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` is not a valid JSON Schema (its own ``$schema``, else 2020-12)."""
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema, jsonschema.Draft202012Validator).check_schema(
            schema
        )
    except jsonschema.SchemaError as exc:
        where = ".".join(str(p) for p in exc.absolute_path)
        return f"{where + ': ' if where else ''}{exc.message}"
    return None


def normalise_path(path: str) -> str | None:
    """A workspace-relative directory in its one spelling, or None when it may leave."""
    if not path or "\\" in path or "\0" in path or path.startswith(("/", "~")):
        return None
    parts = [p for p in PurePosixPath(path).parts if p != "."]
    if ".." in parts:
        return None
    return "/".join(parts) or "."


def runs_code_later(path: str, extra: list[str] | tuple[str, ...] = ()) -> str | None:
    """The first runs-code-later path (built-in, or ``extra`` from
    ``sandbox.readonly_paths``) that writing below ``path`` would reach."""
    for entry in (*RUNS_CODE_LATER, *extra):
        entry = entry.rstrip("/")
        if (
            path == "."
            or entry == path
            or entry.startswith(path + "/")
            or path.startswith(entry + "/")
        ):
            return entry
    return None


def flow_labels(caps: Capabilities) -> frozenset[str]:
    """The session flow guard's labels (``gateway/flow.py``) for a tool granted ``caps``.

    A Wasm tool can reach only what it was granted, so its capabilities say what its
    calls do with data: files (the user's workspace) and environment values (the host's)
    are private reads, a write grant is an internal write, and a network grant both
    reads content an outsider controls and sends data out. A tool granted nothing
    computes on its arguments alone: no label.
    """
    labels = set()
    if caps.files or caps.env:
        labels.add("private_read")
    if any(grant.access == "write" for grant in caps.files):
        labels.add("internal_write")
    if caps.network:
        labels |= {"untrusted_read", "external_write"}
    return frozenset(labels)


def describe(manifest: Manifest) -> list[str]:
    """What an operator reads before accepting: every capability, in plain words."""
    from ..sandbox.env import looks_like_credential

    caps, limits = manifest.capabilities, manifest.limits
    lines = [
        f"{manifest.name} {manifest.version}: {manifest.description.strip()}",
        "functions: " + ", ".join(f.name for f in manifest.functions),
        "capabilities requested:",
    ]
    for grant in caps.files:
        where = "the whole workspace" if grant.path == "." else f"WORKSPACE/{grant.path}"
        verb = "read and WRITE" if grant.access == "write" else "read"
        lines.append(f"  files:   {verb} {where} (seen by the tool as {grant.guest_path})")
    for host in caps.network:
        lines.append(f"  network: {host} (each request is also judged by the network policy)")
    for name in caps.env:
        note = (
            ("  <- looks like a credential: the tool would hold its value; prefer a secret")
            if looks_like_credential(name)
            else ""
        )
        lines.append(f"  env:     {name}{note}")
    for name in caps.secrets:
        lines.append(
            f"  secrets: {name} (as a placeholder in requests to its configured "
            "hosts; the tool never sees the value)"
        )
    if not (caps.files or caps.network or caps.env or caps.secrets):
        lines.append("  none: no files, no network, no environment, no secrets")
    lines.append(
        f"limits: memory {limits.memory_mb} MB, time {limits.timeout:g} s per call, "
        f"output {limits.output_kb} KB"
    )
    return lines
