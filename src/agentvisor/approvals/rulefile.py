"""Writing an "always" answer into a config file as allow rules.

The file is edited as text, so the person's comments and layout stay: the new entries go
at the end of the top-level ``rules:`` list (which is created if missing). The result is
loaded and validated before it replaces the file; if it would not load, nothing changes.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from ..errors import ConfigError
from ..state.asks import ApprovalRequest


def rule_entries(request: ApprovalRequest) -> list[str]:
    """One YAML list entry per pattern, as it will be written."""
    stamp = time.strftime("%Y-%m-%d %H:%M")
    who = f" for session {request.context.session}" if request.context.session else ""
    out = []
    for pattern in request.decision.patterns:
        out.append(
            f"- decision: allow\n  kind: {request.action.kind}\n"
            f"  pattern: {json.dumps(pattern)}\n"
            f"  reason: {json.dumps(f'approved always at {stamp}{who}')}"
        )
    return out


def append_rules(path: str | os.PathLike[str], entries: list[str]) -> None:
    """Add ``entries`` to the ``rules:`` list of the YAML file at ``path``."""
    from ..config import load_config_file

    target = Path(path)
    original = target.read_text(encoding="utf-8") if target.exists() else ""
    updated = _with_rules(original, entries)
    tmp = target.with_name(f".{target.name}.agentvisor-tmp")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_text(updated, encoding="utf-8")
    try:
        load_config_file(tmp)
    except ConfigError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(
            f"{target}: the new rule would make the file invalid, nothing was written: {exc}"
        ) from None
    os.replace(tmp, target)


def _with_rules(text: str, entries: list[str]) -> str:
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if re.match(r"^rules:\s*(#.*)?$", ln)), None)
    if start is None:
        empty = next((i for i, ln in enumerate(lines) if re.match(r"^rules:\s*\[\s*\]", ln)), None)
        if empty is not None:
            del lines[empty]
        block = ["rules:", *("  " + e.replace("\n", "\n  ") for e in entries)]
        body = "\n".join(lines).rstrip("\n")
        return (body + "\n\n" if body else "") + "\n".join(block) + "\n"
    end = start + 1
    indent = "  "
    for i in range(start + 1, len(lines)):
        ln = lines[i]
        if ln.strip() and not ln.startswith((" ", "#", "-")):
            break
        if ln.lstrip().startswith("- ") and end == start + 1:
            indent = ln[: len(ln) - len(ln.lstrip())]
        if ln.strip() and not ln.lstrip().startswith("#"):
            end = i + 1
    new = [indent + e.replace("\n", "\n" + indent) for e in entries]
    return "\n".join([*lines[:end], *new, *lines[end:]]) + "\n"
