"""What the analysis works out about a command, as values: the facts the judges read.

`analysis` produces them (one `Invocation` per simple command that would run, `Note`s
about the program as a whole); `judge` reads them and never looks at the shell text.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from functools import cached_property

from ..records import Declared, Default


class Content(Declared):
    """What a stream or a file given to a command holds, as far as it is known.

    ``kind``: ``none`` (nothing, or a terminal), ``literal`` (``text`` is exact),
    ``file`` (a named file, ``text`` is its path) or ``unknown``. ``taint`` marks
    ``download`` (came from the network) and ``decoded`` (passed through a decoder);
    ``source`` names the commands it came from.
    """

    kind: str = "none"
    text: str = ""
    taint: frozenset[str] = frozenset()
    source: str = ""


NO_INPUT = Content()


class Field(Declared):
    """One argument after expansion. ``segs`` are (text, dynamic) pieces: dynamic text is
    shown as written (``$X``, ``$(cmd)``) because its value is unknown."""

    segs: tuple[tuple[str, bool], ...]
    glob: bool = False
    taint: frozenset[str] = frozenset()
    content: Content | None = None  # a process substitution: what the file holds

    # Computed once per field (cached_property writes the instance's __dict__ directly,
    # which a frozen record allows): the judges ask for them many times.
    @cached_property
    def text(self) -> str:
        return "".join([t for t, _ in self.segs])

    @cached_property
    def dynamic(self) -> bool:
        return any([d for _, d in self.segs])

    @property
    def lead_dynamic(self) -> bool:
        for text, dyn in self.segs:
            if dyn:
                return True
            if text:
                return False
        return False

    def probe(self, unknown: str = "0") -> str:
        """The text with unknown pieces replaced, for checks on what a value looks like."""
        return "".join(unknown if d else t for t, d in self.segs)


def lit(text: str) -> Field:
    return Field(((text, False),))


def unknown_var(name: str) -> Field:
    """A variable whose value is only known when the command runs."""
    return Field(((f"${name}", True),))


class Redir(Declared):
    op: str
    target: Field | None
    fd: int | None = None

    @property
    def writes(self) -> bool:
        return self.op in (">", ">>", ">|", "&>", "&>>", "<>") or (
            self.op == ">&"
            and self.target is not None
            and not self.target.text.isdigit()
            and self.target.text != "-"
        )

    @property
    def reads(self) -> bool:
        return self.op in ("<", "<>")


class CodeFacts(Declared, frozen=False):
    """What inline interpreter code does that matters (filled in by `interp`)."""

    spawns: list[str] = Default(factory=list)
    deletes: list[str] = Default(factory=list)
    dynamic: list[str] = Default(factory=list)
    shell_strings: list[str] = Default(factory=list)
    argvs: list[list[str]] = Default(factory=list)
    delete_targets: list[tuple[str, bool]] = Default(factory=list)  # (path, recursive)
    unparsed: bool = False


class Invocation(Declared, frozen=False):
    """One simple command that would run."""

    argv: tuple[Field, ...]
    program: str | None  # normalised name; None when it cannot be known; "" for none
    redirects: tuple[Redir, ...]
    stdin: Content
    cwd: str | None  # absolute; None when a ``cd`` went somewhere unknown
    via: tuple[str, ...] = ()
    runs_code: Content | None = None  # the shell or interpreter code this runs
    code_lang: str | None = None
    code_facts: CodeFacts | None = None
    env_assigns: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return " ".join(show(f.text) for f in self.argv) or "".join(
            f"{r.op}{r.target.text if r.target else ''}" for r in self.redirects
        )

    @property
    def args(self) -> list[str]:
        return [f.text for f in self.argv[1:]]


class Note(Declared):
    """Something about the program as a whole: ``unparsed``, ``too_deep``,
    ``too_many``, ``too_complex`` (over the analysis budget, ``text`` says how),
    ``recursion`` (``forks`` when it multiplies processes)."""

    kind: str
    text: str
    forks: bool = False


class Analysis(Declared, frozen=False):
    invocations: list[Invocation]
    notes: list[Note]


def show(text: str) -> str:
    """``text`` as a person would type it in a shell."""
    if text and not re.search(r"[\s'\"\\|&;<>()`]", text):
        return text
    return shlex.quote(text)


def program_name(text: str) -> str:
    """``/bin/rm``, ``./../../bin/rm`` and ``rm`` are all ``rm``."""
    if "/" in text:
        text = posixpath.basename(posixpath.normpath(text))
    return text


def resolve_path(text: str, cwd: str | None, home: str) -> str | None:
    """An absolute, normalised path (``/./``, ``//``, ``/usr/../``), or None when it
    depends on a directory that is not known."""
    if text == "~" or text.startswith("~/"):
        text = home + text[1:]
    if not text.startswith("/"):
        if cwd is None:
            return None
        text = cwd.rstrip("/") + "/" + text
    norm = posixpath.normpath(text)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return norm
