"""What a command writes (to stdout, or to files a downloader fills) and where an
interpreter finds its code: worked out from the arguments, never by running anything."""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from .. import knowledge, words
from ..facts import Content, Field, Invocation, lit, resolve_path
from .expand import field_content, join
from .state import Env


def output_of(inv: Invocation) -> Content:
    """What a command writes to stdout, for the ones whose output can be worked out."""
    program = inv.program or ""
    args = inv.argv[1:]
    static = not any(a.dynamic for a in args)
    stdin = inv.stdin
    source = inv.text
    if program == "echo" and static:
        return Content("literal", words.echo_output([a.text for a in args]), source=source)
    if program == "printf" and static and not (args and args[0].text == "-v"):
        return Content("literal", words.printf_output([a.text for a in args]), source=source)
    if (
        program in ("cat", "tee")
        and stdin.kind == "literal"
        and all(a.text == "-" or (program == "tee" and not a.dynamic) for a in args)
    ):
        return Content(stdin.kind, stdin.text, stdin.taint, source)
    if (
        program in ("base64", "base32")
        and stdin.kind == "literal"
        and any(
            a.text in ("-d", "--decode", "-D") or re.fullmatch(r"-[a-zA-Z]*d[a-zA-Z]*", a.text)
            for a in args
        )
    ):
        return _decoded(program, stdin, source)
    if program in knowledge.DOWNLOADERS:
        return Content("unknown", taint=stdin.taint | {"download"}, source=source)
    taint = stdin.taint | ({"decoded"} if program in knowledge.DECODERS else frozenset())
    return Content("unknown", taint=taint, source=source)


def _decoded(program: str, stdin: Content, source: str) -> Content:
    try:
        raw = stdin.text.strip()
        data = (
            base64.b64decode(raw + "=" * (-len(raw) % 4))
            if program == "base64"
            else base64.b32decode(raw + "=" * (-len(raw) % 8))
        )
        return Content(
            "literal", data.decode("utf-8", "replace"), stdin.taint | {"decoded"}, source
        )
    except (binascii.Error, ValueError):
        return Content("unknown", taint=stdin.taint | {"decoded"}, source=source)


def record_download(inv: Invocation, env: Env, home: str) -> None:
    """Files a downloader writes: running one later runs downloaded code."""
    targets = [r.target for r in inv.redirects if r.writes and r.target is not None]
    args = inv.argv[1:]
    for index, a in enumerate(args):
        key, eq, value = a.text.partition("=")
        if key in ("-o", "--output", "-O", "--output-document") and not eq:
            if index + 1 < len(args) and not (key == "-O" and inv.program == "curl"):
                targets.append(args[index + 1])
        elif key in ("--output", "--output-document") and eq:
            targets.append(lit(value))
        elif re.fullmatch(r"-[a-zA-Z]*[oO]", a.text) and index + 1 < len(args):
            if a.text.endswith("O") and inv.program == "curl":
                targets.extend(_remote_names(args))  # -O: named after the URL
            else:
                targets.append(args[index + 1])  # -so FILE, -qO FILE
        elif re.fullmatch(r"-[a-zA-Z]*[oO]\S+", a.text) and not a.text.startswith("--"):
            targets.append(lit(re.split(r"[oO]", a.text, maxsplit=1)[1]))
        elif a.text == "--remote-name" or (inv.program == "curl" and a.text == "-O"):
            targets.extend(_remote_names(args))
    for t in targets:
        path = resolve_path(t.text, env.cwd, home) if not t.dynamic else None
        if path and t.text != "-":
            env.files[path] = frozenset({"download"})


def record_tee(inv: Invocation, env: Env, home: str) -> None:
    """``echo CMD | tee x.sh``: the files tee writes hold its input."""
    if inv.stdin.kind != "literal":
        return
    for f in inv.argv[1:]:
        if not f.dynamic and not f.text.startswith("-"):
            path = resolve_path(f.text, env.cwd, home)
            if path:
                env.written[path] = inv.stdin


def _remote_names(args: Sequence[Field]) -> list[Field]:
    """The files ``curl -O URL`` writes: the last part of each URL's path."""
    names = []
    for f in args:
        if "://" in f.text and not f.dynamic:
            name = posixpath.basename(urlsplit(f.text).path)
            if name:
                names.append(lit(name))
    return names


def interpreter_code(
    inv: Invocation, interp: knowledge.Interpreter
) -> tuple[Content | None, Content | None]:
    """(code, script): inline code given in the arguments, or a program file."""
    args = list(inv.argv[1:])
    code_parts: list[Field] = []
    i = 0
    while i < len(args):
        a = args[i]
        t = a.text
        if a.dynamic and not code_parts:
            break
        if t == "--":
            i += 1
            break
        if t == "-" or not t.startswith("-"):
            break
        key, eq, value = t.partition("=")
        if key in interp.stop_opts:
            return None, Content("file", t)
        if key in interp.script_opts:
            target = value or (args[i + 1].text if i + 1 < len(args) else "")
            return None, Content("file", target)
        if key in interp.code_opts:
            i = _take_code(value if eq else None, args, i, code_parts)
            continue
        if key in interp.opts_with_arg and not eq:
            i += 2
            continue
        if not t.startswith("--") and len(t) > 2:
            glued = _clustered_code(t, interp)
            if glued is not None:
                i = _take_code(glued or None, args, i, code_parts)
                continue
        i += 1
    operands = args[i:]
    if code_parts:
        return field_content(join(code_parts, "\n"), f"{inv.program} code"), None
    if interp.program_is_first_arg and operands:
        return field_content(operands[0], f"{inv.program} program"), None
    if operands:
        first = operands[0]
        if first.text == "-":
            return None, None
        if first.content is not None:
            return first.content, None
        return None, Content("file", first.text, first.taint, first.text)
    return None, None


def _take_code(inline: str | None, args: Sequence[Field], i: int, code_parts: list[Field]) -> int:
    """Add the code an option at ``args[i]`` carries, written into it (``-c=CODE``,
    ``-cCODE``) or as the next argument; the index after it."""
    if inline is not None:
        code_parts.append(lit(inline))
        return i + 1
    if i + 1 < len(args):
        code_parts.append(args[i + 1])
        return i + 2
    return i + 1


def _clustered_code(option: str, interp: knowledge.Interpreter) -> str | None:
    """``-ne 'code'``, ``-pie``, ``-cprint(1)``: the code flag inside a cluster of short
    options; returns glued code, "" when the code is the next argument, None if absent."""
    letters = option[1:]
    code_letters = {o[1] for o in interp.code_opts if len(o) == 2}
    glue_letters = {o[1] for o in interp.opts_with_arg if len(o) == 2} | {"i", "0", "l", "x"}
    for index, c in enumerate(letters):
        if c in code_letters:
            return letters[index + 1 :]
        if c in glue_letters and interp.lang in ("perl", "ruby"):
            return None
    return None
