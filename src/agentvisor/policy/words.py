"""Text-level pieces of bash expansion that need no knowledge of variables: brace
expansion, ``$'...'`` decoding, ``printf`` formats and xargs' splitting of its input."""

from __future__ import annotations

import re
import shlex

from .lazyre import regex

# More words than this from one brace expression are not expanded (kept as written).
MAX_BRACE_WORDS = 1024
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
    points by the caller. Returns ``[text]`` when there is nothing to expand."""
    results = _expand(text)
    if len(results) > MAX_BRACE_WORDS:
        return [text]
    return results


def _expand(text: str) -> list[str]:
    start = _find_group(text)
    if start is None:
        return [text]
    open_i, close_i, alternatives = start
    prefix, suffix = text[:open_i], text[close_i + 1 :]
    out: list[str] = []
    for alt in alternatives:
        for tail in _expand(alt + suffix):
            out.append(prefix + tail)
            if len(out) > MAX_BRACE_WORDS:
                return out
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


def decode_ansi_c(body: str) -> str:
    """The value of ``$'body'``."""
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\" or i + 1 >= len(body):
            out.append(c)
            i += 1
            continue
        n = body[i + 1]
        if n in _C_ESCAPES:
            out.append(_C_ESCAPES[n])
            i += 2
        elif n == "x":
            m = re.match(r"[0-9A-Fa-f]{1,2}", body[i + 2 :])
            if m:
                out.append(chr(int(m.group(), 16)))
                i += 2 + len(m.group())
            else:
                out.append("\\x")
                i += 2
        elif n in "uU":
            m = re.match(r"[0-9A-Fa-f]{1,4}" if n == "u" else r"[0-9A-Fa-f]{1,8}", body[i + 2 :])
            if m:
                out.append(chr(min(int(m.group(), 16), 0x10FFFF)))
                i += 2 + len(m.group())
            else:
                out.append("\\" + n)
                i += 2
        elif n in "01234567":
            m = re.match(r"[0-7]{1,3}", body[i + 1 :])
            assert m is not None
            out.append(chr(int(m.group(), 8) & 0xFF))
            i += 1 + len(m.group())
        elif n == "c" and i + 2 < len(body):
            out.append(chr(ord(body[i + 2]) & 0x1F))
            i += 3
        else:
            out.append("\\" + n)
            i += 2
    return "".join(out)


def printf_output(args: list[str]) -> str:
    """What ``printf FORMAT ARGS...`` prints, for the common directives."""
    if not args:
        return ""
    fmt, rest = args[0], list(args[1:])
    out: list[str] = []
    while True:
        i = 0
        used = False
        while i < len(fmt):
            c = fmt[i]
            if c == "\\" and i + 1 < len(fmt):
                j = i + 2
                if fmt[i + 1] in "01234567":
                    m = re.match(r"[0-7]{1,3}", fmt[i + 1 :])
                    j = i + 1 + len(m.group()) if m else j
                out.append(decode_ansi_c(fmt[i:j]))
                i = j
            elif c == "%" and i + 1 < len(fmt):
                m = re.match(r"%[-+ #0]*\d*(?:\.\d+)?([sdibqcouxXeEfgG%])", fmt[i:])
                if not m:
                    out.append(c)
                    i += 1
                    continue
                conv = m.group(1)
                if conv == "%":
                    out.append("%")
                else:
                    used = True
                    value = rest.pop(0) if rest else ""
                    out.append(decode_ansi_c(value) if conv == "b" else value)
                i += len(m.group())
            else:
                out.append(c)
                i += 1
        if not rest or not used:
            break
    return "".join(out)


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
