"""Word expansion: brace expansion, tilde, parameters, command and process
substitution, then field splitting, into `Field`s whose unknown parts stay marked."""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...records import Declared, replace
from .. import ir, words
from ..facts import NO_INPUT, Content, Field, lit
from .state import PLACEHOLDER, Env

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from .walk import Analyzer

_GLOB_CHARS = "*?["
_HELD = 0xE000  # brace expansion: private-use characters stand for pieces held in place


class Piece(Declared):
    text: str
    quoted: bool
    dynamic: bool = False
    splittable: bool = False  # unquoted expansion result: subject to field splitting
    taint: frozenset[str] = frozenset()
    content: Content | None = None


def expand(
    a: Analyzer, word: ir.Word, env: Env, depth: int, via: tuple[str, ...], split: bool = True
) -> list[Field]:
    """Brace expansion, tilde, parameters, substitutions, then field splitting."""
    pieces: list[Piece] = []
    for part in word.parts:
        a.budget.tick()  # a word of 100,000 escaped characters has as many parts
        pieces.extend(_piece(a, part, env, depth, via))
    a.budget.expanded(sum(len(p.text) for p in pieces))
    results: list[Field] = []
    for variant in _brace_variants(pieces):
        results.extend(_split_fields(variant, split, _ifs(env)))
    return results


def expand_one(a: Analyzer, word: ir.Word, env: Env, depth: int, via: tuple[str, ...]) -> Field:
    """A word expanded without field splitting, as one field (assignments, redirects)."""
    return join_fields(expand(a, word, env, depth, via, split=False))


def _piece(a: Analyzer, part: ir.Part, env: Env, depth: int, via: tuple[str, ...]) -> list[Piece]:
    if isinstance(part, ir.Lit):
        return [Piece(part.text, part.quoted)]
    if isinstance(part, ir.Tilde):
        home = (
            a.home if not part.user else ("/root" if part.user == "root" else f"/home/{part.user}")
        )
        return [Piece(home, True)]
    if isinstance(part, ir.Param):
        piece = _param(part, env)
        hidden = _run_subs(a, part.subs, env, depth, via)
        if piece.dynamic and hidden:
            piece = replace(piece, taint=piece.taint | hidden)
        return [piece]
    if isinstance(part, ir.CmdSub):
        inner = env.copy()
        inner.stdin = NO_INPUT
        inner.out_redirects = ()
        out = a.run(part.body, inner, depth, (*via, "$(...)"))
        if out.kind == "literal":
            text = out.text.rstrip("\n")
            return [Piece(text, part.quoted, splittable=not part.quoted, taint=out.taint)]
        taint = out.taint | {"cmdsub"}
        return [Piece(part.text, part.quoted, dynamic=True, splittable=False, taint=taint)]
    if isinstance(part, ir.ProcSub):
        inner = env.copy()
        inner.stdin = NO_INPUT if part.direction == "<" else Content("unknown")
        inner.out_redirects = ()
        out = a.run(part.body, inner, depth, (*via, f"{part.direction}(...)"))
        content = out if part.direction == "<" else None
        return [Piece("/dev/fd/63", True, content=content)]
    if isinstance(part, ir.Arith):
        hidden = _run_subs(a, part.subs, env, depth, via)
        return [Piece(part.text, True, dynamic=True, taint=hidden)]
    raise TypeError(part)


def _run_subs(
    a: Analyzer, subs: tuple[ir.Word, ...], env: Env, depth: int, via: tuple[str, ...]
) -> frozenset[str]:
    """Run the substitutions inside a parameter or arithmetic expansion (their commands
    run whatever the expansion's value); the taint of what they print."""
    taint: frozenset[str] = frozenset()
    for word in subs:
        for f in expand(a, word, env, depth, via, split=False):
            taint |= f.taint
    return taint


def _operator(p: ir.Param, value: Field | None, env: Env) -> Field | None:
    """The value of ``${x:-word}``, ``${x:=word}``, ``${x:?}``, ``${x:+word}`` when it can be
    known: a variable known to be set is its value; one this command line never set takes
    the literal default (what runs when the environment does not set it either)."""
    op = p.op
    known = value is not None and value.text != "" and not value.dynamic
    m = re.match(r"^:?([-=?+])(.*)$", op, re.S)
    if m is None:
        return None
    kind, word = m.groups()
    if kind == "+":
        return lit(word) if known and _literal(word) else None
    if known:
        return value
    if value is None and kind in "-=" and _literal(word):
        text = env.vars["HOME"].text + word[1:] if word == "~" or word.startswith("~/") else word
        if kind == "=":  # ${x:=word} also sets x
            env.vars[p.name] = lit(text)
        return lit(text)
    return None


def _literal(word: str) -> bool:
    return not any(c in word for c in "$`\\'\"")


def _param(p: ir.Param, env: Env) -> Piece:
    shown = p.text or f"${p.name}"
    value: Field | None
    if p.name.isdigit():
        index = int(p.name)
        value = (
            env.positional[index - 1]
            if 0 < index <= len(env.positional)
            else (lit("") if index > 0 else env.arg0)
        )
    elif p.name in ("@", "*"):
        # Each positional parameter is a word of its own, quoted or not.
        value = join_fields(list(env.positional)) if env.positional else lit("")
        if not value.dynamic:
            return Piece(value.text, p.quoted, splittable=True, taint=value.taint)
    elif p.name == "#":
        value = lit(str(len(env.positional)))
    elif p.op in ("[@]", "[*]") and f"{p.name}[@]" in env.vars:
        value = env.vars[f"{p.name}[@]"]  # an array's items, each a word
        if not value.dynamic:
            return Piece(value.text, p.quoted, splittable=True, taint=value.taint)
        p = ir.Param(p.name, p.quoted, "", p.text)
    else:
        value = env.vars.get(p.name)
    resolved = _operator(p, value, env)
    if resolved is not None:
        value, p = resolved, ir.Param(p.name, p.quoted, "", p.text)
    if value is None or p.op:
        return Piece(shown, p.quoted, dynamic=True)
    if p.name == "IFS" and not p.quoted:
        return Piece(" ", False, splittable=True)
    if value.dynamic:
        return Piece(
            value.text if value.text.startswith("$") else shown,
            p.quoted,
            dynamic=True,
            taint=value.taint,
        )
    return Piece(value.text, p.quoted, splittable=not p.quoted, taint=value.taint)


def join_fields(fields: list[Field]) -> Field:
    if not fields:
        return lit("")
    if len(fields) == 1:
        return fields[0]
    return join_with_spaces(fields)


def _brace_variants(pieces: list[Piece]) -> list[list[Piece]]:
    """Brace expansion over the unquoted literal text, other pieces held in place."""
    if not any(not p.quoted and not p.dynamic and "{" in p.text for p in pieces):
        return [pieces]
    template: list[str] = []
    held: list[Piece] = []
    for p in pieces:
        if not p.quoted and not p.dynamic and not p.splittable:
            template.append(p.text)
        else:
            template.append(chr(_HELD + len(held)))
            held.append(p)
    variants = []
    for text in words.brace_expand("".join(template)):
        out: list[Piece] = []
        buf: list[str] = []
        for c in text:
            code = ord(c) - _HELD
            if 0 <= code < len(held):
                if buf:
                    out.append(Piece("".join(buf), False))
                    buf = []
                out.append(held[code])
            else:
                buf.append(c)
        if buf:
            out.append(Piece("".join(buf), False))
        variants.append(out)
    return variants


def _ifs(env: Env) -> str:
    """The characters unquoted expansions are split at (``IFS``; blanks when unknown)."""
    ifs = env.vars.get("IFS")
    if ifs is None or ifs.dynamic:
        return " \t\n"
    return ifs.text


def _has_glob(text: str) -> bool:
    # `in` scans in C; a set of a long expansion's characters would be built in Python.
    return any(c in text for c in _GLOB_CHARS)


def _split_fields(pieces: list[Piece], split: bool, ifs: str = " \t\n") -> list[Field]:
    fields: list[Field] = []
    segs: list[tuple[str, bool]] = []
    glob = False
    taint: set[str] = set()
    content: Content | None = None
    started = False

    def close() -> None:
        nonlocal segs, glob, taint, content, started
        if started:
            fields.append(Field(tuple(segs) or (("", False),), glob, frozenset(taint), content))
        segs, glob, taint, content, started = [], False, set(), None, False

    for p in pieces:
        if p.splittable and split and not p.dynamic:
            chunks = re.split(f"[{re.escape(ifs)}]+", p.text) if ifs else [p.text]
            for index, chunk in enumerate(chunks):
                if index > 0:
                    close()
                if chunk:
                    segs.append((chunk, False))
                    glob = glob or _has_glob(chunk)
                    started = True
            taint |= p.taint
            continue
        if p.quoted or p.text or p.dynamic:
            started = True
        segs.append((p.text, p.dynamic))
        taint |= p.taint
        if not p.quoted and not p.dynamic and _has_glob(p.text):
            glob = True
        if p.content is not None:
            content = p.content
    close()
    return fields


def join_with_spaces(fields: Sequence[Field]) -> Field:
    return join(fields, " ", glob=any(f.glob for f in fields))


def join(fields: Sequence[Field], separator: str, glob: bool = False) -> Field:
    segs: list[tuple[str, bool]] = []
    for index, f in enumerate(fields):
        if index:
            segs.append((separator, False))
        segs.extend(f.segs)
    return Field(tuple(segs), glob, frozenset[str]().union(*(f.taint for f in fields)))


def replace_in(f: Field, token: str, value: Field) -> Field:
    if token not in f.text or f.dynamic:
        return f
    head, _, tail = f.text.partition(token)
    segs = ((head, False), *value.segs, (tail, False))
    return Field(
        tuple(s for s in segs if s[0] or s[1]),
        f.glob or value.glob,
        f.taint | value.taint,
        value.content,
    )


def field_content(f: Field, what: str, newline: bool = False) -> Content:
    """A field used as text (code for ``sh -c``, a here-string). Unknown pieces that came
    from a variable become an unknown word in the code; text from a command substitution
    makes the whole text unknown (it could be any code)."""
    if f.content is not None:
        return f.content
    if not f.dynamic:
        return Content("literal", f.text + ("\n" if newline else ""), f.taint, what)
    if "cmdsub" in f.taint or "download" in f.taint:
        return Content("unknown", "", f.taint, what)
    text = "".join(f"${{{PLACEHOLDER}}}" if d else t for t, d in f.segs)
    return Content("literal", text, f.taint, what)


def concat(outputs: list[Content]) -> Content:
    real = [o for o in outputs if o.kind != "none"]
    if not real:
        return NO_INPUT
    taint = frozenset[str]().union(*(o.taint for o in real))
    if all(o.kind == "literal" for o in real):
        return Content("literal", "".join(o.text for o in real), taint)
    return Content("unknown", "", taint)
