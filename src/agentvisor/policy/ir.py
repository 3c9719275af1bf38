"""The shell program as data: what `parse` produces and `analysis` walks.

Words keep their parts (literal text with its quoting, parameters, command and process
substitutions) so expansion can be done the way bash does it, later, with what is known
about variables and the working directory at that point.

The nodes are frozen `records.Declared` records.
"""

from __future__ import annotations

from ..records import Declared


class Lit(Declared):
    text: str
    quoted: bool  # quoted or escaped: no brace expansion, splitting or globbing


class Param(Declared):
    name: str  # HOME, 1, @, ...
    quoted: bool
    op: str = ""  # anything after the name in ${...} (":-x", "#pat", "[0]"); "" for plain $x
    text: str = ""  # source, for display


class CmdSub(Declared):
    body: Seq
    quoted: bool
    text: str


class ProcSub(Declared):
    body: Seq
    direction: str  # "<" (reads the command's output) or ">"
    text: str


class Arith(Declared):
    quoted: bool
    text: str


class Tilde(Declared):
    user: str  # "" for the current user


Part = Lit | Param | CmdSub | ProcSub | Arith | Tilde


class Word(Declared):
    parts: tuple[Part, ...]
    text: str


class Redirect(Declared):
    op: str  # > >> < <> >& <& &> &>> >| << <<- <<<
    fd: int | None
    target: Word | None  # file, fd number or here-string word
    heredoc: Word | None = None  # here-document body (quoted delimiter: one literal part)


class Command(Declared):
    assigns: tuple[tuple[str, Word | None], ...]
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]
    text: str


class Assign(Declared):
    """A standalone assignment (also from export/declare/local/readonly)."""

    name: str
    value: Word | None
    dynamic: bool = False  # e.g. an array or `read`: the value is not known


class Pipeline(Declared):
    stages: tuple[Stmt, ...]


class Seq(Declared):
    """Statements that run one after another (``;``, ``&&``, ``||``, newlines)."""

    items: tuple[Stmt, ...]


class Background(Declared):
    stmt: Stmt


class Block(Declared):
    """Statements run in this shell (``{ }``, if/while/case bodies) or a subshell."""

    body: Seq
    redirects: tuple[Redirect, ...] = ()
    subshell: bool = False


class For(Declared):
    var: str | None
    values: tuple[Word, ...] | None  # None: "$@" (no ``in``) or a C-style loop
    body: Seq


class FuncDef(Declared):
    name: str
    body: Stmt


class Evaluate(Declared):
    """Words evaluated for their side effects only (``[[ ]]``, ``case WORD``, ``(( ))``)."""

    words: tuple[Word, ...]


class Unparsed(Declared):
    text: str


Stmt = Command | Assign | Pipeline | Seq | Background | Block | For | FuncDef | Evaluate | Unparsed
