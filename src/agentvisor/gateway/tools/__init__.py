"""The built-in tools, named as in Hermes Agent, and the toolsets that group them.

A tool is a `ToolSpec`: its MCP name, description and JSON input schema, the toolsets it
belongs to, a function that turns arguments into policy actions (a tool from outside
the project returns ``Action("tool", name, arguments=...)``), and a function that runs
it. Adding a tool = writing those two functions in a module here and listing the
spec in that module's ``TOOLS`` (gathered by `builtin_tools`); the pipeline (policy,
approvals, audit, result shaping) is the gateway's, never the tool's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...actions import Action
from ...records import Declared
from ..results import ToolOutput

if TYPE_CHECKING:
    from ..session import Session


class ToolSpec(Declared):
    name: str
    description: str
    input_schema: dict[str, Any]
    toolsets: frozenset[str]
    actions: Callable[[Session, dict[str, Any]], list[Action]]
    run: Callable[[Session, dict[str, Any]], ToolOutput]
    # Flow labels (private_read, untrusted_read, external_write, internal_write) for the
    # session flow guard; None: not labelled here (built-in tools get theirs from
    # gateway/flow.py, any other is assumed to read untrusted content and send it out).
    labels: frozenset[str] | None = None


# Which toolsets each named toolset expands to; "all" is every tool.
TOOLSET_GROUPS: dict[str, frozenset[str]] = {
    "file": frozenset({"file"}),
    "terminal": frozenset({"terminal"}),
    "web": frozenset({"web"}),
    "http": frozenset({"http"}),
    "safe": frozenset({"web"}),
    "debugging": frozenset({"terminal", "file", "web"}),
    "wasm": frozenset({"wasm"}),
    "upstreams": frozenset({"upstreams"}),
}


def builtin_tools() -> list[ToolSpec]:
    from . import files, terminal, web

    return [*terminal.TOOLS, *files.TOOLS, *web.TOOLS]


def select(tools: list[ToolSpec], toolsets: list[str]) -> dict[str, ToolSpec]:
    """The tools a session with these toolsets may list and call."""
    if "all" in toolsets:
        return {t.name: t for t in tools}
    groups: set[str] = set()
    for name in toolsets:
        groups |= TOOLSET_GROUPS[name]
    return {t.name: t for t in tools if t.toolsets & groups}


def schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": False,
    }
