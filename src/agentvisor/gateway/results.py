"""Shaping what the agent gets back: capped, free of terminal escapes, secrets redacted,
and refusals that say what was refused, why, and how a person could allow it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..actions import Action, Decision
from ..records import Declared, Default

# CSI, OSC (terminated by BEL or ST), and other two-byte escape sequences.
_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class ToolOutput(Declared, frozen=False):
    """A tool's answer before shaping; `text` is what the agent reads."""

    text: str
    is_error: bool = False
    data: dict[str, Any] = Default(factory=dict)  # structured extras (exit code, ...)


def strip_ansi(text: str) -> str:
    return _CONTROL.sub("", _ANSI.sub("", text))


def cap(text: str, limit: int) -> str:
    """Keep the head and the tail, with a clear marker of what was cut."""
    data = text.encode(errors="replace")  # a lone surrogate must not end the call here
    if len(data) <= limit:
        return text
    half = limit // 2
    head = data[:half].decode(errors="ignore")
    tail = data[-half:].decode(errors="ignore")
    cut = len(data) - len(head.encode()) - len(tail.encode())
    marker = f"[... {cut} bytes of output cut: showing the first and last {half} ...]"
    return f"{head}\n\n{marker}\n\n{tail}"


def shape(output: ToolOutput, limit: int, redact: Callable[[str], str]) -> ToolOutput:
    text = cap(redact(strip_ansi(output.text)), limit)
    return ToolOutput(text=text, is_error=output.is_error, data=output.data)


def describe(action: Action) -> str:
    what = {
        "exec": "run the command",
        "read": "read",
        "write": "write",
        "fetch": "fetch",
        "secret": "use the secret",
        "tool": "call the tool",
    }[action.kind]
    target = action.target if len(action.target) <= 300 else action.target[:300] + "..."
    if action.kind == "fetch" and action.method:
        return f"{what} {action.method} {target}"
    if action.kind == "secret" and action.host:
        return f"{what} {target} toward {action.host}"
    return f"{what} {target}"


def refusal(action: Action, decision: Decision) -> ToolOutput:
    lines = [f"Refused: {describe(action)}", f"Why: {decision.reason}"]
    if decision.rule:
        lines.append(f"Rule: {decision.rule}")
    if decision.hardline:
        lines.append("This is on agentvisor's hardline floor: no rule, grant or mode allows it.")
    elif decision.hint:
        lines.append(f"How a person could allow it: {decision.hint}")
    return ToolOutput(
        text="\n".join(lines), is_error=True, data={"refused": True, "decision": decision.as_dict()}
    )
