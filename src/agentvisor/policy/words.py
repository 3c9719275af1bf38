"""Text-level pieces of bash expansion that need no knowledge of variables: brace
expansion, ``$'...'`` decoding, ``printf`` formats and xargs' splitting of its input."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable

from .lazyre import regex
from .limits import MAX_BRACE_GROUPS, MAX_BRACE_WORDS, MAX_EXPANDED_CHARS, TooComplex

_SEQ_RE = (
    r"^(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?$"
    r"|^([A-Za-z])\.\.([A-Za-z])(?:\.\.(-?\d+))?$"
)
_C_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def brace_expand(text: str) -> list[str]:
    """Bash brace expansion of one word (``{a,b}``, ``{1..3}``, nested); characters
    that must not take part (quoted text, expansions) are passed as private-use code
    points by the caller. Returns ``[text]`` when there is nothing to expand; raises
    `TooComplex` when it would make more words than can be judged (kept as written,
    they would hide the command bash really runs)."""
    if text.count("{") > 2 * MAX_BRACE_GROUPS:  # before any work: matching is quadratic
        raise TooComplex(f"a word has more than {MAX_BRACE_GROUPS} brace groups")
    return _expand(text, 0)


def _expand(text: str, groups: int) -> list[str]:
    start = _find_group(text)
    if start is None:
        return [text]
    if groups >= MAX_BRACE_GROUPS:
        raise TooComplex(f"a word has more than {MAX_BRACE_GROUPS} brace groups")
    open_i, close_i, alternatives = start
    prefix, suffix = text[:open_i], text[close_i + 1 :]
    out: list[str] = []
    for alt in alternatives:
        for tail in _expand(alt + suffix, groups + 1):
            out.append(prefix + tail)
            if len(out) > MAX_BRACE_WORDS:
                raise TooComplex(f"a brace expansion makes more than {MAX_BRACE_WORDS} words")
    return out


def _find_group(text: str) -> tuple[int, int, list[str]] | None:
    """The first brace group that expands: its bounds and its alternatives."""
    i = 0
    while i < len(text):
        if text[i] == "{" and (i == 0 or text[i - 1] != "$"):
            close, commas = _match_brace(text, i)
            if close is not None:
                body = text[i + 1 : close]
                if commas:
                    return i, close, _split_commas(body)
                seq = _sequence(body)
                if seq is not None:
                    return i, close, seq
        i += 1
    return None


def _match_brace(text: str, open_i: int) -> tuple[int | None, bool]:
    depth = 0
    commas = False
    for j in range(open_i, len(text)):
        c = text[j]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j, commas
        elif c == "," and depth == 1:
            commas = True
    return None, False


def _split_commas(body: str) -> list[str]:
    parts: list[str] = []
    depth = 0
    cur: list[str] = []
    for c in body:
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return parts


def _sequence(body: str) -> list[str] | None:
    m = regex(_SEQ_RE).match(body)
    if m is None:
        return None
    if m.group(1) is not None:
        a, b = int(m.group(1)), int(m.group(2))
        step = abs(int(m.group(3) or 1)) or 1
        if abs(b - a) // step > MAX_BRACE_WORDS:
            return None
        rng = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
        return [str(x) for x in rng]
    a, b = ord(m.group(4)), ord(m.group(5))
    step = abs(int(m.group(6) or 1)) or 1
    rng = range(a, b + 1, step) if a <= b else range(a, b - 1, -step)
    return [chr(x) for x in rng]


# One escape of ``$'...'``: \xHH, \uHHHH, \UHHHHHHHH, \OOO, \cX, or any other character.
_ANSI_C_ESCAPE = re.compile(
    r"\\(?:x([0-9A-Fa-f]{1,2})|u([0-9A-Fa-f]{1,4})|U([0-9A-Fa-f]{1,8})|([0-7]{1,3})|c(.)|(.))",
    re.DOTALL,
)


def decode_ansi_c(body: str, tick: Callable[[], None] | None = None) -> str:
    """The value of ``$'body'``, in one pass of the regex engine. ``tick`` is called at
    every escape (the analysis budget's clock: a word may hold 60,000 of them)."""
    if tick is None:
        return _ANSI_C_ESCAPE.sub(_ansi_c_char, body)

    def counted(m: re.Match[str]) -> str:
        tick()
        return _ansi_c_char(m)

    return _ANSI_C_ESCAPE.sub(counted, body)


def _ansi_c_char(m: re.Match[str]) -> str:
    hex2, hex4, hex8, octal, control, other = m.groups()
    if hex2 is not None:
        return chr(int(hex2, 16))
    if hex4 is not None or hex8 is not None:
        return chr(min(int(hex4 or hex8, 16), 0x10FFFF))
    if octal is not None:
        return chr(int(octal, 8) & 0xFF)
    if control is not None:
        return chr(ord(control) & 0x1F)
    return _C_ESCAPES.get(other, "\\" + other)


# One piece of a printf format: an escape, a directive, a run of plain text, or a lone
# backslash or percent sign (printed as itself).
_PRINTF_PIECE = re.compile(
    r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))"
    r"|(%[-+ #0]*\d*(?:\.\d+)?([sdibqcouxXeEfgG%]))"
    r"|([^\\%]+)|(.)",
    re.DOTALL,
)


def printf_output(args: list[str]) -> str:
    """What ``printf FORMAT ARGS...`` prints, for the common directives. The format is read
    once into literal text and directives (a format may hold 60,000 escapes), then used
    until the arguments run out; an output past the expansion limit is too complex."""
    if not args:
        return ""
    pieces = _printf_format(args[0])
    rest = list(args[1:])
    out: list[str] = []
    size = 0
    while True:
        used = False
        for piece, conv in pieces:
            if conv is None:
                out.append(piece)
                size += len(piece)
                continue
            used = True
            value = rest.pop(0) if rest else ""
            out.append(decode_ansi_c(value) if conv == "b" else value)
            size += len(value)
        if size > MAX_EXPANDED_CHARS:
            raise TooComplex(
                f"printf's output grows beyond {MAX_EXPANDED_CHARS // 1024 // 1024} MiB"
            )
        if not rest or not used:
            break
    return "".join(out)


def _printf_format(fmt: str) -> list[tuple[str, str | None]]:
    """``fmt`` as (literal text, None) and (directive, its conversion) pieces."""
    pieces: list[tuple[str, str | None]] = []
    literal: list[str] = []
    for m in _PRINTF_PIECE.finditer(fmt):
        octal, hex2, other, directive, conv, plain, lone = m.groups()
        if directive is not None and conv != "%":
            pieces.append(("".join(literal), None))
            literal = []
            pieces.append((directive, conv))
        elif directive is not None:
            literal.append("%")
        elif octal is not None:
            literal.append(chr(int(octal, 8) & 0xFF))
        elif hex2 is not None:
            literal.append(chr(int(hex2, 16)))
        elif other is not None:
            literal.append(_C_ESCAPES.get(other, "\\" + other))
        else:
            literal.append(plain if plain is not None else lone)
    pieces.append(("".join(literal), None))
    return [p for p in pieces if p[0] or p[1] is not None]


def echo_output(args: list[str]) -> str:
    newline, escapes = True, False
    while args and re.fullmatch(r"-[neE]+", args[0]):
        flags = args.pop(0)
        newline = newline and "n" not in flags
        escapes = "e" in flags or (escapes and "E" not in flags)
    text = " ".join(args)
    if escapes:
        text = decode_ansi_c(text)
    return text + ("\n" if newline else "")


def xargs_words(text: str, delimiter: str | None = None) -> list[str]:
    """How xargs cuts its input into arguments (blanks and quotes, or a delimiter)."""
    if delimiter is not None:
        return [w for w in text.split(delimiter) if w]
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()
