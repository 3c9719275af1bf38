"""What the operator writes under ``upstreams:``: one entry per third-party MCP server.

upstreams:
  - name: fs                       # tools appear as fs__read_file, fs__write_file, ...
    command: [node, /opt/mcp/fs/dist/index.js, /work]   # a stdio server, run in the sandbox
    mounts: ["/opt/mcp/fs:/opt/mcp/fs:ro"]              # what the sandbox must see of it
    env: {GITHUB_TOKEN: "{{secret:GITHUB_TOKEN}}"}       # injected by the proxy, not here
    labels: {write_file: [internal_write]}              # overrides the defaults by name
  - name: docs
    url: https://mcp.example.com/mcp                    # an HTTP server, via the guard
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ..records import Declared, Default

LABELS = ("private_read", "untrusted_read", "external_write", "internal_write")

_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
_KEYS = frozenset({"name", "command", "url", "env", "mounts", "cwd", "labels", "timeout"})


class UpstreamSettings(Declared):
    """One upstream MCP server: a stdio ``command`` or an HTTP ``url``."""

    name: str
    command: tuple[str, ...] = ()
    url: str | None = None
    env: Mapping[str, str] = Default(factory=dict)
    mounts: tuple[str, ...] = ()  # sandbox.mounts syntax, HOST:INSIDE[:ro|rw]
    cwd: str | None = None  # inside the sandbox; default: the workspace
    labels: Mapping[str, tuple[str, ...]] = Default(factory=dict)  # tool -> labels
    timeout: float = 60.0  # seconds one call may take

    @property
    def kind(self) -> str:
        return "stdio" if self.command else "http"


def parse_upstreams(raw: Any, source: str = "upstreams") -> list[UpstreamSettings]:
    """Check the ``upstreams:`` list; errors name the entry and the key."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(f"{source}: must be a list of servers")
    servers = [_parse_one(entry, f"{source}[{index}]") for index, entry in enumerate(raw)]
    names = [s.name for s in servers]
    for name in names:
        if names.count(name) > 1:
            raise ConfigError(f"{source}: the name {name!r} is used twice")
    return servers


def _parse_one(entry: Any, where: str) -> UpstreamSettings:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be a mapping with name and command or url")
    unknown = sorted(set(entry) - _KEYS)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(unknown)} (accepted: {', '.join(sorted(_KEYS))})"
        )
    name = entry.get("name")
    if not isinstance(name, str) or not _NAME.match(name) or "__" in name:
        raise ConfigError(
            f"{where}.name: {name!r} must be lower-case letters, digits, - and _ "
            "(no '__': it separates the server from the tool in tool names)"
        )
    command, url = entry.get("command"), entry.get("url")
    if bool(command) == bool(url):
        raise ConfigError(f"{where}: give exactly one of command (stdio) or url (HTTP)")
    if command is not None and not _strings(command):
        raise ConfigError(f"{where}.command: must be a list of strings, e.g. [node, server.js]")
    if url is not None and (
        not isinstance(url, str) or not url.startswith(("http://", "https://"))
    ):
        raise ConfigError(f"{where}.url: must be an http:// or https:// URL")
    return UpstreamSettings(
        name=name,
        command=tuple(command or ()),
        url=url,
        env=_string_map(entry.get("env"), f"{where}.env"),
        mounts=tuple(_string_list(entry.get("mounts"), f"{where}.mounts")),
        cwd=entry.get("cwd"),
        labels=_labels(entry.get("labels"), f"{where}.labels"),
        timeout=_positive(entry.get("timeout", 60.0), f"{where}.timeout"),
    )


def _strings(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def _string_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: must be a list of strings")
    return value


def _string_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(f"{where}: must map names to strings")
    return dict(value)


def _labels(value: Any, where: str) -> dict[str, tuple[str, ...]]:
    out: dict[str, tuple[str, ...]] = {}
    for tool, labels in _mapping(value, where).items():
        names = [labels] if isinstance(labels, str) else labels
        if not isinstance(names, list) or any(n not in LABELS for n in names):
            raise ConfigError(
                f"{where}.{tool}: labels must be a list of {', '.join(LABELS)}, got {labels!r}"
            )
        out[str(tool)] = tuple(names)
    return out


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be a mapping")
    return value


def _positive(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigError(f"{where}: must be a positive number of seconds, got {value!r}")
    return float(value)
