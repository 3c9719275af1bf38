"""read_file, write_file, patch and search_files: on the host, through the file guard.

Reads and writes go through `FileGuard` (openat2 beneath the workspace and configured
roots); searching runs grep/find inside the session's sandbox, where protected paths
are not even mounted. What the guard refuses or cannot do propagates: the gateway answers
it (a `GuardRefused` as a refusal, in the audit log too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...actions import Action
from ..results import ToolOutput
from . import ToolSpec, schema

if TYPE_CHECKING:
    from ..session import Session


def _read_actions(session: Session, args: dict[str, Any]) -> list[Action]:
    return [Action("read", args["path"])]


def _write_actions(session: Session, args: dict[str, Any]) -> list[Action]:
    return [Action("write", args["path"])]


def read_file(session: Session, args: dict[str, Any]) -> ToolOutput:
    offset = max(int(args.get("offset") or 1), 1)
    limit = int(args.get("limit") or 2000)
    text, real = session.files.read_text(args["path"])
    lines = text.splitlines()
    chosen = lines[offset - 1 : offset - 1 + limit]
    width = len(str(offset + len(chosen)))
    body = "\n".join(f"{n:>{width}}|{line}" for n, line in enumerate(chosen, start=offset))
    more = len(lines) - (offset - 1 + len(chosen))
    note = (
        f"\n[{more} more lines: read again with offset={offset + len(chosen)}]" if more > 0 else ""
    )
    return ToolOutput(body + note, data={"path": str(real), "total_lines": len(lines)})


def write_file(session: Session, args: dict[str, Any]) -> ToolOutput:
    data = args["content"].encode()
    real = session.files.write_bytes(args["path"], data)
    return ToolOutput(f"wrote {len(data)} bytes to {real}", data={"path": str(real)})


def patch(session: Session, args: dict[str, Any]) -> ToolOutput:
    path, old, new = args["path"], args["old_string"], args["new_string"]
    if not old:
        return ToolOutput("old_string is empty; give the exact text to replace", is_error=True)
    text, _ = session.files.read_text(path)
    count = text.count(old)
    if count == 0:
        return ToolOutput(
            f"{path}: old_string was not found; read the file and copy the text "
            "exactly, including whitespace",
            is_error=True,
        )
    if count > 1 and not args.get("replace_all"):
        return ToolOutput(
            f"{path}: old_string occurs {count} times; add surrounding lines to "
            "make it unique, or set replace_all=true",
            is_error=True,
        )
    updated = text.replace(old, new) if args.get("replace_all") else text.replace(old, new, 1)
    real = session.files.write_bytes(path, updated.encode())
    return ToolOutput(
        f"replaced {count if args.get('replace_all') else 1} occurrence(s) in {real}",
        data={"path": str(real), "replacements": count},
    )


def _search_actions(session: Session, args: dict[str, Any]) -> list[Action]:
    return [Action("read", args.get("path") or ".")]


def search_files(session: Session, args: dict[str, Any]) -> ToolOutput:
    located = session.files.locate(args.get("path") or ".", write=False)
    limit = str(int(args.get("limit") or 200))
    if args.get("target", "content") == "files":
        argv = ["find", located.shown, "-name", args["pattern"], "-not", "-path", "*/.git/*"]
    else:
        argv = ["grep", "-rnIE", "--exclude-dir=.git", "-m", limit, "-e", args["pattern"]]
        if args.get("glob"):
            argv.append(f"--include={args['glob']}")
        argv += ["--", located.shown]
    result = session.run(argv, timeout=60)
    out = result.stdout.decode(errors="replace")
    lines = out.splitlines()[: int(limit)]
    if result.exit_code not in (0, 1):
        return ToolOutput(result.stderr.decode(errors="replace") or "search failed", is_error=True)
    return ToolOutput("\n".join(lines) or "no matches", data={"matches": len(lines)})


TOOLS = [
    ToolSpec(
        name="read_file",
        description="Read a text file in the workspace (or a configured read root), with line "
        "numbers. Large files: use offset and limit to read a part.",
        input_schema=schema(
            {
                "path": {
                    "type": "string",
                    "description": "Path, relative to the workspace or absolute.",
                },
                "offset": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Number of lines (default 2000).",
                },
            },
            ["path"],
        ),
        toolsets=frozenset({"file"}),
        actions=_read_actions,
        run=read_file,
    ),
    ToolSpec(
        name="write_file",
        description="Create or overwrite a text file in the workspace with the given content "
        "(parent directories are created). Git hooks, .git/config, .envrc and protected paths "
        "are refused.",
        input_schema=schema(
            {
                "path": {
                    "type": "string",
                    "description": "Path, relative to the workspace or absolute.",
                },
                "content": {"type": "string", "description": "The whole new content."},
            },
            ["path", "content"],
        ),
        toolsets=frozenset({"file"}),
        actions=_write_actions,
        run=write_file,
    ),
    ToolSpec(
        name="patch",
        description="Replace an exact piece of text in a file. old_string must occur exactly "
        "once (or set replace_all). Copy it from read_file output without the line numbers.",
        input_schema=schema(
            {
                "path": {"type": "string"},
                "old_string": {"type": "string", "description": "Exact text to find."},
                "new_string": {"type": "string", "description": "Text to put instead."},
                "replace_all": {"type": "boolean", "description": "Replace every occurrence."},
            },
            ["path", "old_string", "new_string"],
        ),
        toolsets=frozenset({"file"}),
        actions=_write_actions,
        run=patch,
    ),
    ToolSpec(
        name="search_files",
        description="Search the workspace: target 'content' (default) finds lines matching a "
        "regular expression (grep -E); target 'files' finds file names matching a glob.",
        input_schema=schema(
            {
                "pattern": {"type": "string", "description": "Regex for content, glob for files."},
                "target": {"type": "string", "enum": ["content", "files"]},
                "path": {
                    "type": "string",
                    "description": "Directory to search (default: the workspace).",
                },
                "glob": {
                    "type": "string",
                    "description": "Only files whose name matches, e.g. '*.py' (content search).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "Most results (default 200).",
                },
            },
            ["pattern"],
        ),
        toolsets=frozenset({"file"}),
        actions=_search_actions,
        run=search_files,
    ),
]
