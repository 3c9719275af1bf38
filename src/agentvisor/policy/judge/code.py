"""Checks on what runs as code: a program only known at run time, downloaded or
decoded code, inline interpreter code that starts processes, and notes of the analysis
(recursion, nesting, text that could not be parsed)."""

from __future__ import annotations

from collections.abc import Iterator

from ..facts import Invocation, Note
from .findings import Finding, from_, short
from .scope import Scope


def unknown_program(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    if inv.program is not None:
        return
    head = inv.argv[0]
    if "download" in head.taint:
        yield Finding(
            "download_exec", "deny", f"`{piece}` runs downloaded text as a command", piece
        )
    else:
        what = "a glob" if head.glob and not head.dynamic else "only known when it runs"
        yield Finding("dynamic_code", "ask", f"the program in `{piece}` is {what}", piece)


def runs_code(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    code = inv.runs_code
    if code is None:
        return
    if "download" in code.taint:
        reason = f"`{piece}` runs code downloaded from the network{from_(code)}"
        yield Finding("download_exec", "deny", reason, piece)
    elif code.kind == "unknown":
        tag = "decoded" if "decoded" in code.taint else ""
        what = "decoded text" if tag else "code that is only known when it runs"
        yield Finding("dynamic_code", "ask", f"`{piece}` runs {what}{from_(code)}", piece, tag=tag)
    elif code.kind == "literal" and "decoded" in code.taint:
        reason = f"`{piece}` runs code that was decoded first (an obfuscated payload)"
        yield Finding("dynamic_code", "ask", reason, piece, tag="decoded")


def inline_code(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    facts = inv.code_facts
    if facts is None:
        return
    lang = inv.code_lang or "inline"
    if facts.unparsed:
        yield Finding(
            "dynamic_code", "ask", f"inline {lang} code in `{piece}` cannot be parsed", piece
        )
    for names, does in (
        (facts.spawns, "starts processes"),
        (facts.deletes, "deletes files"),
        (facts.dynamic, "builds code at run time"),
    ):
        if names:
            reason = f"inline {lang} code {does} ({', '.join(sorted(set(names)))})"
            yield Finding("dynamic_code", "ask", reason, piece)


def note_findings(n: Note) -> list[Finding]:
    """What a note of the analysis about the whole program means."""
    if n.kind == "recursion" and n.forks:
        reason = f"function `{n.text}` calls itself in a pipe or in the background: a fork bomb"
        return [Finding("fork_bomb", "deny", reason, n.text)]
    if n.kind == "recursion":
        return [
            Finding("dynamic_code", "ask", f"function `{n.text}` calls itself without end", n.text)
        ]
    if n.kind == "unparsed":
        reason = f"part of the command could not be parsed: `{short(n.text, 80)}`"
        return [Finding("dynamic_code", "ask", reason, n.text)]
    if n.kind == "too_deep":
        reason = "shells, eval and functions are nested too deep to follow"
        return [Finding("dynamic_code", "ask", reason, n.text)]
    if n.kind == "too_many":
        return [Finding("dynamic_code", "ask", n.text, n.text)]
    return []
