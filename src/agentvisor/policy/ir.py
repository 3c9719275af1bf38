"""The shell program as data: what `parse` produces and `analyze` walks.

Words keep their parts (literal text with its quoting, parameters, command and process
substitutions) so expansion can be done the way bash does it, later, with what is known
about variables and the working directory at that point.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Lit:
    text: str
    quoted: bool  # quoted or escaped: no brace expansion, splitting or globbing


@dataclass(frozen=True)
class Param:
    name: str  # HOME, 1, @, ...
    quoted: bool
    op: str = ""  # anything after the name in ${...} (":-x", "#pat", "[0]"); "" for plain $x
    text: str = ""  # source, for display


@dataclass(frozen=True)
class CmdSub:
    body: Seq
    quoted: bool
    text: str


@dataclass(frozen=True)
class ProcSub:
    body: Seq
    direction: str  # "<" (reads the command's output) or ">"
    text: str


@dataclass(frozen=True)
class Arith:
    quoted: bool
    text: str


@dataclass(frozen=True)
class Tilde:
    user: str  # "" for the current user


Part = Lit | Param | CmdSub | ProcSub | Arith | Tilde


@dataclass(frozen=True)
class Word:
    parts: tuple[Part, ...]
    text: str


@dataclass(frozen=True)
class Redirect:
    op: str  # > >> < <> >& <& &> &>> >| << <<- <<<
    fd: int | None
    target: Word | None  # file, fd number or here-string word
    heredoc: Word | None = None  # here-document body (quoted delimiter: one literal part)


@dataclass(frozen=True)
class Command:
    assigns: tuple[tuple[str, Word | None], ...]
    words: tuple[Word, ...]
    redirects: tuple[Redirect, ...]
    text: str


@dataclass(frozen=True)
class Assign:
    """A standalone assignment (also from export/declare/local/readonly)."""

    name: str
    value: Word | None
    dynamic: bool = False  # e.g. an array or `read`: the value is not known


@dataclass(frozen=True)
class Pipeline:
    stages: tuple[Stmt, ...]


@dataclass(frozen=True)
class Seq:
    """Statements that run one after another (``;``, ``&&``, ``||``, newlines)."""

    items: tuple[Stmt, ...]


@dataclass(frozen=True)
class Background:
    stmt: Stmt


@dataclass(frozen=True)
class Block:
    """Statements run in this shell (``{ }``, if/while/case bodies) or a subshell."""

    body: Seq
    redirects: tuple[Redirect, ...] = ()
    subshell: bool = False


@dataclass(frozen=True)
class For:
    var: str | None
    values: tuple[Word, ...] | None  # None: "$@" (no ``in``) or a C-style loop
    body: Seq


@dataclass(frozen=True)
class FuncDef:
    name: str
    body: Stmt


@dataclass(frozen=True)
class Evaluate:
    """Words evaluated for their side effects only (``[[ ]]``, ``case WORD``, ``(( ))``)."""

    words: tuple[Word, ...]


@dataclass(frozen=True)
class Unparsed:
    text: str


Stmt = Command | Assign | Pipeline | Seq | Background | Block | For | FuncDef | Evaluate | Unparsed
