"""The shell program as data: what `parse` produces and `analyze` walks.

Words keep their parts (literal text with its quoting, parameters, command and process
substitutions) so expansion can be done the way bash does it, later, with what is known
about variables and the working directory at that point.

The nodes are frozen records (see `records`: dataclasses cost too much to import).
"""

from __future__ import annotations

from ..records import Record, init


class Lit(Record):
    __match_args__ = ("text", "quoted")
    __slots__ = __match_args__
    text: str
    quoted: bool  # quoted or escaped: no brace expansion, splitting or globbing

    def __init__(self, text: str, quoted: bool) -> None:
        init(self, "text", text)
        init(self, "quoted", quoted)


class Param(Record):
    __match_args__ = ("name", "quoted", "op", "text")
    __slots__ = __match_args__
    name: str  # HOME, 1, @, ...
    quoted: bool
    op: str  # anything after the name in ${...} (":-x", "#pat", "[0]"); "" for plain $x
    text: str  # source, for display

    def __init__(self, name: str, quoted: bool, op: str = "", text: str = "") -> None:
        init(self, "name", name)
        init(self, "quoted", quoted)
        init(self, "op", op)
        init(self, "text", text)


class CmdSub(Record):
    __match_args__ = ("body", "quoted", "text")
    __slots__ = __match_args__
    body: Seq
    quoted: bool
    text: str

    def __init__(self, body: Seq, quoted: bool, text: str) -> None:
        init(self, "body", body)
        init(self, "quoted", quoted)
        init(self, "text", text)


class ProcSub(Record):
    __match_args__ = ("body", "direction", "text")
    __slots__ = __match_args__
    body: Seq
    direction: str  # "<" (reads the command's output) or ">"
    text: str

    def __init__(self, body: Seq, direction: str, text: str) -> None:
        init(self, "body", body)
        init(self, "direction", direction)
        init(self, "text", text)


class Arith(Record):
    __match_args__ = ("quoted", "text")
    __slots__ = __match_args__
    quoted: bool
    text: str

    def __init__(self, quoted: bool, text: str) -> None:
        init(self, "quoted", quoted)
        init(self, "text", text)


class Tilde(Record):
    __match_args__ = ("user",)
    __slots__ = __match_args__
    user: str  # "" for the current user

    def __init__(self, user: str) -> None:
        init(self, "user", user)


Part = Lit | Param | CmdSub | ProcSub | Arith | Tilde


class Word(Record):
    __match_args__ = ("parts", "text")
    __slots__ = __match_args__
    parts: tuple[Part, ...]
    text: str

    def __init__(self, parts: tuple[Part, ...], text: str) -> None:
        init(self, "parts", parts)
        init(self, "text", text)


class Redirect(Record):
    __match_args__ = ("op", "fd", "target", "heredoc")
    __slots__ = __match_args__
    op: str  # > >> < <> >& <& &> &>> >| << <<- <<<
    fd: int | None
    target: Word | None  # file, fd number or here-string word
    heredoc: Word | None  # here-document body (quoted delimiter: one literal part)

    def __init__(
        self, op: str, fd: int | None, target: Word | None, heredoc: Word | None = None
    ) -> None:
        init(self, "op", op)
        init(self, "fd", fd)
        init(self, "target", target)
        init(self, "heredoc", heredoc)


class Command(Record):
    __match_args__ = ("assigns", "words", "redirects", "text")
    __slots__ = __match_args__
    assigns: tuple[tuple[str, Word | None], ...]
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]
    text: str

    def __init__(
        self,
        assigns: tuple[tuple[str, Word | None], ...],
        words: tuple[Word, ...],
        redirects: tuple[Redirect, ...],
        text: str,
    ) -> None:
        init(self, "assigns", assigns)
        init(self, "words", words)
        init(self, "redirects", redirects)
        init(self, "text", text)


class Assign(Record):
    """A standalone assignment (also from export/declare/local/readonly)."""

    __match_args__ = ("name", "value", "dynamic")
    __slots__ = __match_args__
    name: str
    value: Word | None
    dynamic: bool  # e.g. an array or `read`: the value is not known

    def __init__(self, name: str, value: Word | None, dynamic: bool = False) -> None:
        init(self, "name", name)
        init(self, "value", value)
        init(self, "dynamic", dynamic)


class Pipeline(Record):
    __match_args__ = ("stages",)
    __slots__ = __match_args__
    stages: tuple[Stmt, ...]

    def __init__(self, stages: tuple[Stmt, ...]) -> None:
        init(self, "stages", stages)


class Seq(Record):
    """Statements that run one after another (``;``, ``&&``, ``||``, newlines)."""

    __match_args__ = ("items",)
    __slots__ = __match_args__
    items: tuple[Stmt, ...]

    def __init__(self, items: tuple[Stmt, ...]) -> None:
        init(self, "items", items)


class Background(Record):
    __match_args__ = ("stmt",)
    __slots__ = __match_args__
    stmt: Stmt

    def __init__(self, stmt: Stmt) -> None:
        init(self, "stmt", stmt)


class Block(Record):
    """Statements run in this shell (``{ }``, if/while/case bodies) or a subshell."""

    __match_args__ = ("body", "redirects", "subshell")
    __slots__ = __match_args__
    body: Seq
    redirects: tuple[Redirect, ...]
    subshell: bool

    def __init__(
        self, body: Seq, redirects: tuple[Redirect, ...] = (), subshell: bool = False
    ) -> None:
        init(self, "body", body)
        init(self, "redirects", redirects)
        init(self, "subshell", subshell)


class For(Record):
    __match_args__ = ("var", "values", "body")
    __slots__ = __match_args__
    var: str | None
    values: tuple[Word, ...] | None  # None: "$@" (no ``in``) or a C-style loop
    body: Seq

    def __init__(self, var: str | None, values: tuple[Word, ...] | None, body: Seq) -> None:
        init(self, "var", var)
        init(self, "values", values)
        init(self, "body", body)


class FuncDef(Record):
    __match_args__ = ("name", "body")
    __slots__ = __match_args__
    name: str
    body: Stmt

    def __init__(self, name: str, body: Stmt) -> None:
        init(self, "name", name)
        init(self, "body", body)


class Evaluate(Record):
    """Words evaluated for their side effects only (``[[ ]]``, ``case WORD``, ``(( ))``)."""

    __match_args__ = ("words",)
    __slots__ = __match_args__
    words: tuple[Word, ...]

    def __init__(self, words: tuple[Word, ...]) -> None:
        init(self, "words", words)


class Unparsed(Record):
    __match_args__ = ("text",)
    __slots__ = __match_args__
    text: str

    def __init__(self, text: str) -> None:
        init(self, "text", text)


Stmt = Command | Assign | Pipeline | Seq | Background | Block | For | FuncDef | Evaluate | Unparsed
