"""Shell program → the simple commands it would run (`Invocation`), seeing through
quoting, expansion, wrappers, nested shells, eval, functions, aliases, substitutions,
pipes into shells and inline interpreter code.

It judges nothing: it only works out, as far as can be known without running anything,
which programs run with which arguments, what they read on stdin, where their output
goes and in which directory. What cannot be known is marked dynamic, never guessed.
"""

from __future__ import annotations

import base64
import binascii
import posixpath
import re
import shlex
from collections.abc import Sequence

from ..records import Record, Struct, init
from . import ir, knowledge, words
from .lazyre import regex

MAX_DEPTH = 10  # nested shells, eval, aliases and function calls
MAX_INVOCATIONS = 2000
MAX_LOOP_VALUES = 16
MAX_SOURCE = 256 * 1024  # longer command lines are not analysed (and so not allowed)
_PLACEHOLDER = "__agentvisor_unknown__"
_GLOB_CHARS = set("*?[")
_ASSIGN_RE = r"^[A-Za-z_][A-Za-z0-9_]*="
_PRIVATE = "\ue000"  # brace expansion: marks parts that must not take part


class Content(Record):
    """What a stream or a file given to a command holds, as far as it is known.

    ``kind``: ``none`` (nothing, or a terminal), ``literal`` (``text`` is exact),
    ``file`` (a named file, ``text`` is its path) or ``unknown``. ``taint`` marks
    ``download`` (came from the network) and ``decoded`` (passed through a decoder);
    ``source`` names the commands it came from.
    """

    __match_args__ = ("kind", "text", "taint", "source")
    __slots__ = __match_args__
    kind: str
    text: str
    taint: frozenset[str]
    source: str

    def __init__(
        self,
        kind: str = "none",
        text: str = "",
        taint: frozenset[str] = frozenset(),
        source: str = "",
    ) -> None:
        init(self, "kind", kind)
        init(self, "text", text)
        init(self, "taint", taint)
        init(self, "source", source)


NO_INPUT = Content()


class Field(Record):
    """One argument after expansion. ``segs`` are (text, dynamic) pieces: dynamic text is
    shown as written (``$X``, ``$(cmd)``) because its value is unknown."""

    __match_args__ = ("segs", "glob", "taint", "content")
    __slots__ = __match_args__
    segs: tuple[tuple[str, bool], ...]
    glob: bool
    taint: frozenset[str]
    content: Content | None  # a process substitution: what the file holds

    def __init__(
        self,
        segs: tuple[tuple[str, bool], ...],
        glob: bool = False,
        taint: frozenset[str] = frozenset(),
        content: Content | None = None,
    ) -> None:
        init(self, "segs", segs)
        init(self, "glob", glob)
        init(self, "taint", taint)
        init(self, "content", content)

    @property
    def text(self) -> str:
        return "".join(t for t, _ in self.segs)

    @property
    def dynamic(self) -> bool:
        return any(d for _, d in self.segs)

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


class Redir(Record):
    __match_args__ = ("op", "target", "fd")
    __slots__ = __match_args__
    op: str
    target: Field | None
    fd: int | None

    def __init__(self, op: str, target: Field | None, fd: int | None = None) -> None:
        init(self, "op", op)
        init(self, "target", target)
        init(self, "fd", fd)

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


class CodeFacts(Struct):
    """What inline interpreter code does that matters (filled in by `interp`)."""

    __match_args__ = (
        "spawns",
        "deletes",
        "dynamic",
        "shell_strings",
        "argvs",
        "delete_targets",
        "unparsed",
    )
    __slots__ = __match_args__
    spawns: list[str]
    deletes: list[str]
    dynamic: list[str]
    shell_strings: list[str]
    argvs: list[list[str]]
    delete_targets: list[tuple[str, bool]]  # (path, recursive)
    unparsed: bool

    def __init__(self) -> None:
        self.spawns = []
        self.deletes = []
        self.dynamic = []
        self.shell_strings = []
        self.argvs = []
        self.delete_targets = []
        self.unparsed = False


class Invocation(Struct):
    """One simple command that would run."""

    __match_args__ = (
        "argv",
        "program",
        "redirects",
        "stdin",
        "cwd",
        "via",
        "runs_code",
        "code_lang",
        "code_facts",
        "env_assigns",
    )
    __slots__ = __match_args__
    argv: tuple[Field, ...]
    program: str | None  # normalised name; None when it cannot be known; "" for none
    redirects: tuple[Redir, ...]
    stdin: Content
    cwd: str | None  # absolute; None when a ``cd`` went somewhere unknown
    via: tuple[str, ...]
    runs_code: Content | None  # the shell or interpreter code this runs
    code_lang: str | None
    code_facts: CodeFacts | None
    env_assigns: tuple[str, ...]

    def __init__(
        self,
        argv: tuple[Field, ...],
        program: str | None,
        redirects: tuple[Redir, ...],
        stdin: Content,
        cwd: str | None,
        via: tuple[str, ...] = (),
        runs_code: Content | None = None,
        code_lang: str | None = None,
        code_facts: CodeFacts | None = None,
        env_assigns: tuple[str, ...] = (),
    ) -> None:
        self.argv = argv
        self.program = program
        self.redirects = redirects
        self.stdin = stdin
        self.cwd = cwd
        self.via = via
        self.runs_code = runs_code
        self.code_lang = code_lang
        self.code_facts = code_facts
        self.env_assigns = env_assigns

    @property
    def text(self) -> str:
        return " ".join(_show(f.text) for f in self.argv) or "".join(
            f"{r.op}{r.target.text if r.target else ''}" for r in self.redirects
        )

    @property
    def args(self) -> list[str]:
        return [f.text for f in self.argv[1:]]


class Note(Record):
    """Something about the program as a whole: ``unparsed``, ``too_deep``,
    ``too_many``, ``recursion`` (``forks`` when it multiplies processes)."""

    __match_args__ = ("kind", "text", "forks")
    __slots__ = __match_args__
    kind: str
    text: str
    forks: bool

    def __init__(self, kind: str, text: str, forks: bool = False) -> None:
        init(self, "kind", kind)
        init(self, "text", text)
        init(self, "forks", forks)


class Analysis(Struct):
    __match_args__ = ("invocations", "notes")
    __slots__ = __match_args__
    invocations: list[Invocation]
    notes: list[Note]

    def __init__(self, invocations: list[Invocation], notes: list[Note]) -> None:
        self.invocations = invocations
        self.notes = notes


def _show(text: str) -> str:
    if text and not re.search(r"[\s'\"\\|&;<>()`]", text):
        return text
    return shlex.quote(text)


class _Func(Struct):
    __match_args__ = ("body", "forks", "called")
    __slots__ = __match_args__
    body: ir.Stmt
    forks: bool
    called: bool

    def __init__(self, body: ir.Stmt, forks: bool, called: bool = False) -> None:
        self.body = body
        self.forks = forks
        self.called = called


class _Env(Struct):
    __match_args__ = (
        "vars",
        "funcs",
        "aliases",
        "cwd",
        "positional",
        "stdin",
        "out_redirects",
        "files",
        "arg0",
    )
    __slots__ = __match_args__
    vars: dict[str, Field]
    funcs: dict[str, _Func]
    aliases: dict[str, str]
    cwd: str | None
    positional: tuple[Field, ...]
    stdin: Content
    out_redirects: tuple[Redir, ...]
    files: dict[str, frozenset[str]]  # path → taint
    arg0: Field

    def __init__(
        self,
        vars: dict[str, Field],
        funcs: dict[str, _Func],
        aliases: dict[str, str],
        cwd: str | None,
        positional: tuple[Field, ...],
        stdin: Content,
        out_redirects: tuple[Redir, ...] = (),
        files: dict[str, frozenset[str]] | None = None,
        arg0: Field | None = None,
    ) -> None:
        self.vars = vars
        self.funcs = funcs
        self.aliases = aliases
        self.cwd = cwd
        self.positional = positional
        self.stdin = stdin
        self.out_redirects = out_redirects
        self.files = {} if files is None else files
        self.arg0 = lit("sh") if arg0 is None else arg0

    def copy(self) -> _Env:
        return _Env(
            dict(self.vars),
            dict(self.funcs),
            dict(self.aliases),
            self.cwd,
            self.positional,
            self.stdin,
            self.out_redirects,
            self.files,
            self.arg0,
        )


def analyze_source(source: str, workspace: str, home: str) -> Analysis:
    a = _Analyzer(home)
    if len(source) > MAX_SOURCE:
        a.note("too_many", f"the command line is longer than {MAX_SOURCE} characters")
        return Analysis([], a.notes)
    env = a.new_env(workspace)
    a.run_source(source, env, 0, ())
    a.finish(env)
    return Analysis(a.invocations, a.notes)


def analyze_argv(argv: Sequence[str], workspace: str, home: str) -> Analysis:
    """An argv run without a shell: no expansion, but wrappers, shells and
    interpreters in it are still looked through."""
    a = _Analyzer(home)
    env = a.new_env(workspace)
    a.dispatch(tuple(lit(x) for x in argv), (), env.stdin, env, 0, ())
    return Analysis(a.invocations, a.notes)


class _Analyzer:
    def __init__(self, home: str) -> None:
        self.home = home
        self.invocations: list[Invocation] = []
        self.notes: list[Note] = []
        self.calls: list[str] = []

    def new_env(self, workspace: str) -> _Env:
        env_vars = {"HOME": lit(self.home), "PWD": lit(workspace), "IFS": lit(" \t\n")}
        return _Env(env_vars, {}, {}, workspace, (), NO_INPUT)

    def note(self, kind: str, text: str, forks: bool = False) -> None:
        if not any(n.kind == kind and n.text == text for n in self.notes):
            self.notes.append(Note(kind, text, forks))

    def finish(self, env: _Env) -> None:
        # A function defined but not called here could still be run later: judge its body.
        for name, func in list(env.funcs.items()):
            if not func.called:
                func.called = True
                inner = env.copy()
                inner.positional = (Field((("${@}", True),)),)
                self.calls.append(name)
                self.run(func.body, inner, 1, (f"function {name}",))
                self.calls.pop()

    # --- statements -------------------------------------------------------------------

    def run_source(self, source: str, env: _Env, depth: int, via: tuple[str, ...]) -> Content:
        if depth > MAX_DEPTH:
            self.note("too_deep", source[:200])
            return Content("unknown")
        from .parse import parse

        result = parse(source)
        if result.errors:
            self.note("unparsed", source[:200])
        return self.run(result.seq, env, depth, via)

    def run(self, stmt: ir.Stmt, env: _Env, depth: int, via: tuple[str, ...]) -> Content:
        if len(self.invocations) > MAX_INVOCATIONS:
            self.note("too_many", "more commands than can be judged")
            return Content("unknown")
        if isinstance(stmt, ir.Command):
            return self.run_command(stmt, env, depth, via)
        if isinstance(stmt, ir.Seq):
            outputs = [self.run(s, env, depth, via) for s in stmt.items]
            return _concat(outputs)
        if isinstance(stmt, ir.Pipeline):
            stdin = env.stdin
            out = NO_INPUT
            for stage in stmt.stages:
                stage_env = env.copy()
                stage_env.stdin = stdin
                out = self.run(stage, stage_env, depth, via)
                stdin = out
            return out
        if isinstance(stmt, ir.Background):
            return self.run(stmt.stmt, env.copy(), depth, via)
        if isinstance(stmt, ir.Block):
            inner = env.copy() if stmt.subshell else env
            saved = (inner.stdin, inner.out_redirects)
            stdin, outs = self.redirects(stmt.redirects, inner, depth, via)
            if stdin is not None:
                inner.stdin = stdin
            inner.out_redirects = inner.out_redirects + outs
            out = self.run(stmt.body, inner, depth, via)
            inner.stdin, inner.out_redirects = saved
            return NO_INPUT if any(r.writes and r.fd in (None, 1) for r in outs) else out
        if isinstance(stmt, ir.Assign):
            if stmt.dynamic or stmt.value is None:
                env.vars[stmt.name] = Field(((f"${stmt.name}", True),))
            else:
                env.vars[stmt.name] = self.join_fields(
                    self.expand(stmt.value, env, depth, via, split=False), stmt.name
                )
            return NO_INPUT
        if isinstance(stmt, ir.For):
            return self.run_for(stmt, env, depth, via)
        if isinstance(stmt, ir.FuncDef):
            env.funcs[stmt.name] = _Func(stmt.body, _forks(stmt.body, stmt.name))
            return NO_INPUT
        if isinstance(stmt, ir.Evaluate):
            for w in stmt.words:
                self.expand(w, env, depth, via)
            return Content("unknown")
        if isinstance(stmt, ir.Unparsed):
            self.note("unparsed", stmt.text[:200])
            return Content("unknown")
        raise TypeError(f"unknown statement {stmt!r}")

    def run_for(self, stmt: ir.For, env: _Env, depth: int, via: tuple[str, ...]) -> Content:
        values: list[Field] | None = None
        if stmt.values is not None:
            values = []
            for w in stmt.values:
                values.extend(self.expand(w, env, depth, via))
            if len(values) > MAX_LOOP_VALUES or any(v.dynamic for v in values):
                values = None
        if stmt.var is None or values is None:
            if stmt.var:
                env.vars[stmt.var] = Field(((f"${stmt.var}", True),))
            return self.run(stmt.body, env, depth, via)
        out: list[Content] = []
        for value in values or [lit("")]:
            env.vars[stmt.var] = value
            out.append(self.run(stmt.body, env, depth, via))
        return _concat(out)

    def redirects(
        self, redirects: Sequence[ir.Redirect], env: _Env, depth: int, via: tuple[str, ...]
    ) -> tuple[Content | None, tuple[Redir, ...]]:
        stdin: Content | None = None
        outs: list[Redir] = []
        for r in redirects:
            if r.heredoc is not None:
                stdin = self.text_content(r.heredoc, env, depth, via, "here-document")
                continue
            target = None
            if r.target is not None:
                target = self.join_fields(self.expand(r.target, env, depth, via, split=False))
            if r.op == "<<<":
                if target is not None:
                    stdin = _field_content(target, "here-string", newline=True)
                continue
            redir = Redir(r.op, target, r.fd)
            if redir.reads and target is not None and r.fd in (None, 0):
                stdin = Content("file", target.text, target.taint, target.text)
            outs.append(redir)
        return stdin, tuple(outs)

    def text_content(
        self, word: ir.Word, env: _Env, depth: int, via: tuple[str, ...], what: str
    ) -> Content:
        f = self.join_fields(self.expand(word, env, depth, via, split=False))
        return _field_content(f, what)

    # --- commands ---------------------------------------------------------------------

    def run_command(self, cmd: ir.Command, env: _Env, depth: int, via: tuple[str, ...]) -> Content:
        fields: list[Field] = []
        for w in cmd.words:
            fields.extend(self.expand(w, env, depth, via))
        assigns: list[tuple[str, Field]] = []
        for name, value in cmd.assigns:
            v = (
                self.join_fields(self.expand(value, env, depth, via, split=False))
                if value is not None
                else lit("")
            )
            assigns.append((name, v))
        stdin, outs = self.redirects(cmd.redirects, env, depth, via)
        redirs = env.out_redirects + outs
        if not fields:
            for name, v in assigns:
                env.vars[name] = v
            if redirs:
                self.emit(Invocation((), "", redirs, stdin or env.stdin, env.cwd, via))
            return stdin or NO_INPUT
        env_assigns = tuple(f"{n}={v.text}" for n, v in assigns)
        out = self.dispatch(
            tuple(fields), redirs, stdin or env.stdin, env, depth, via, env_assigns=env_assigns
        )
        if any(r.writes and r.fd in (None, 1) for r in outs):
            return NO_INPUT
        return out

    def emit(self, inv: Invocation) -> Invocation:
        self.invocations.append(inv)
        return inv

    def dispatch(
        self,
        fields: tuple[Field, ...],
        redirs: tuple[Redir, ...],
        stdin: Content,
        env: _Env,
        depth: int,
        via: tuple[str, ...],
        env_assigns: tuple[str, ...] = (),
    ) -> Content:
        """Run one simple command: look it up as alias, function, builtin, wrapper, shell,
        interpreter or program, record it, and return what it writes to stdout."""
        if depth > MAX_DEPTH:
            self.note("too_deep", " ".join(f.text for f in fields)[:200])
            return Content("unknown")
        head = fields[0]
        if head.dynamic or head.glob:
            self.emit(
                Invocation(fields, None, redirs, stdin, env.cwd, via, env_assigns=env_assigns)
            )
            return Content("unknown", taint=stdin.taint | head.taint)
        name = head.text
        if name in env.aliases and f"alias {name}" not in via:
            source = env.aliases[name] + " " + " ".join(_show(f.text) for f in fields[1:])
            return self.run_source(source, env, depth + 1, (*via, f"alias {name}"))
        if name in env.funcs:
            return self.call_function(name, fields, env, depth, via)
        program = program_name(name)
        inv = self.emit(
            Invocation(fields, program, redirs, stdin, env.cwd, via, env_assigns=env_assigns)
        )
        if program in knowledge.DOWNLOADERS:
            self.record_download(inv, env)
        if "/" in name:
            path = resolve_path(name, env.cwd, self.home)
            if path in env.files:
                inv.runs_code = Content("file", path, env.files[path], path)
        handler = _HANDLERS.get(program)
        if handler is not None:
            return handler(self, inv, env, depth)
        if program in knowledge.WRAPPERS:
            return self.unwrap(inv, env, depth)
        if program in knowledge.SHELLS:
            return self.shell(inv, env, depth)
        interp = knowledge.interpreter(program)
        if interp is not None:
            return self.interpreter(inv, interp, env, depth)
        return _output_of(inv)

    def record_download(self, inv: Invocation, env: _Env) -> None:
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
            elif re.fullmatch(r"-[a-zA-Z]*[oO]\S+", a.text) and not a.text.startswith("--"):
                targets.append(lit(re.split(r"[oO]", a.text, maxsplit=1)[1]))
        for t in targets:
            path = resolve_path(t.text, env.cwd, self.home) if not t.dynamic else None
            if path and t.text != "-":
                env.files[path] = frozenset({"download"})

    def call_function(
        self, name: str, fields: tuple[Field, ...], env: _Env, depth: int, via: tuple[str, ...]
    ) -> Content:
        func = env.funcs[name]
        func.called = True
        if name in self.calls:
            self.note("recursion", name, func.forks)
            return Content("unknown")
        saved = env.positional
        env.positional = fields[1:]
        self.calls.append(name)
        try:
            return self.run(func.body, env, depth + 1, (*via, f"function {name}"))
        finally:
            self.calls.pop()
            env.positional = saved

    def sub(
        self,
        inv: Invocation,
        argv: Sequence[Field],
        env: _Env,
        depth: int,
        label: str,
        stdin: Content | None = None,
    ) -> Content:
        """Run ``argv`` as the command ``inv`` starts."""
        if not argv:
            return NO_INPUT
        return self.dispatch(
            tuple(argv),
            (),
            inv.stdin if stdin is None else stdin,
            env,
            depth + 1,
            (*inv.via, label),
        )

    def code(
        self,
        inv: Invocation,
        code: Content,
        env: _Env,
        depth: int,
        label: str,
        positional: Sequence[Field] | None = None,
        arg0: Field | None = None,
    ) -> Content:
        """``inv`` runs ``code`` as shell code."""
        inv.runs_code = code
        inv.code_lang = "shell"
        if code.kind != "literal":
            return Content("unknown", taint=code.taint)
        inner = env.copy()
        inner.stdin = inv.stdin
        if positional is not None:
            inner.positional = tuple(positional)
        if arg0 is not None:
            inner.arg0 = arg0
        return self.run_source(code.text, inner, depth + 1, (*inv.via, label))

    # --- wrappers, shells, interpreters -----------------------------------------------

    def unwrap(self, inv: Invocation, env: _Env, depth: int) -> Content:
        program = inv.program or ""
        spec = knowledge.WRAPPERS[program]
        args = list(inv.argv[1:])
        i = 0
        exec_flag = False
        while i < len(args):
            a = args[i]
            t = a.text
            if a.dynamic:
                break
            if t == "--":
                i += 1
                break
            if spec.assignments and regex(_ASSIGN_RE).match(t):
                i += 1
                continue
            if program == "su" and t == "-":
                i += 1
                continue
            if not t.startswith("-") or t == "-" or (program == "nice" and t[1:].isdigit()):
                if program == "nice" and t.startswith("-"):
                    i += 1
                    continue
                break
            key, _, value = t.partition("=")
            if key in spec.no_command_opts:
                return Content("unknown")
            if program == "watch" and key in ("-x", "--exec"):
                exec_flag = True
            string_opt = key in spec.shell_string_opts or (
                not t.startswith("--") and len(t) > 2 and f"-{t[-1]}" in spec.shell_string_opts
            )
            if string_opt:
                text_field = lit(value) if value else (args[i + 1] if i + 1 < len(args) else None)
                if text_field is None:
                    return NO_INPUT
                rest = args[i + (1 if value else 2) :]
                if program == "env":
                    return self.env_split(inv, text_field, rest, env, depth)
                return self.code(
                    inv, _field_content(text_field, program), env, depth, f"{program} {key}"
                )
            if key in spec.opts_with_arg and not value:
                i += 2
                continue
            if t[:2] in spec.clustered_arg_opts:
                i += 1
                continue
            if not t.startswith("--") and len(t) > 2 and f"-{t[-1]}" in spec.opts_with_arg:
                i += 2
                continue
            i += 1
        operands = args[i:]
        if program in ("su", "runuser") and operands and not operands[0].text.startswith("-"):
            operands = operands[1:]  # the user; what follows goes to the user's shell
            return (
                self.shell_args(inv, operands, env, depth)
                if operands
                else self.sub(inv, [lit("sh")], env, depth, program)
            )
        operands = operands[spec.skip :] if program not in ("su",) else operands
        if not operands:
            if spec.default:
                argv = [lit("sh") if x == "$SHELL" else lit(x) for x in spec.default]
                return self.sub(inv, argv, env, depth, program)
            return NO_INPUT
        if spec.joins_to_shell and not exec_flag:
            text = " ".join(f.text for f in operands)
            joined = Field(
                ((text, any(f.dynamic for f in operands)),),
                taint=frozenset().union(*(f.taint for f in operands)),
            )
            return self.code(inv, _field_content(joined, program), env, depth, program)
        return self.sub(inv, operands, env, depth, program)

    def env_split(
        self, inv: Invocation, text: Field, rest: Sequence[Field], env: _Env, depth: int
    ) -> Content:
        if text.dynamic:
            inv.runs_code = Content("unknown", taint=text.taint, source="env -S")
            return Content("unknown")
        try:
            parts = shlex.split(text.text)
        except ValueError:
            parts = text.text.split()
        return self.sub(inv, [lit(p) for p in parts] + list(rest), env, depth, "env -S")

    def shell(self, inv: Invocation, env: _Env, depth: int) -> Content:
        args = list(inv.argv[1:])
        i = 0
        command_mode = read_stdin = False
        while i < len(args):
            a = args[i]
            t = a.text
            if a.dynamic:
                break
            if t in ("--", "-"):
                i += 1
                break
            if len(t) < 2 or t[0] not in "-+":
                break
            if t in knowledge.SHELL_OPTS_WITH_ARG:
                i += 2
                continue
            if t.startswith("--"):
                i += 1
                continue
            letters = t[1:]
            if t[0] == "-" and "c" in letters:
                command_mode = True
            if "s" in letters:
                read_stdin = True
            i += 2 if ("o" in letters or "O" in letters) else 1
        operands = args[i:]
        if command_mode:
            if not operands:
                return NO_INPUT
            return self.code(
                inv,
                _field_content(operands[0], "shell -c"),
                env,
                depth,
                f"{inv.program} -c",
                positional=operands[2:],
                arg0=operands[1] if len(operands) > 1 else None,
            )
        if operands and not read_stdin:
            return self.script_operand(inv, operands[0], operands[1:], env, depth)
        return self.stdin_code(inv, env, depth, positional=operands)

    def shell_args(self, inv: Invocation, args: Sequence[Field], env: _Env, depth: int) -> Content:
        """``su USER ARGS``: the arguments go to the user's shell."""
        fake = Invocation(
            (lit("sh"), *args),
            "sh",
            inv.redirects,
            inv.stdin,
            inv.cwd,
            inv.via,
            inv.runs_code,
            inv.code_lang,
            inv.code_facts,
            inv.env_assigns,
        )
        return self.shell(fake, env, depth)

    def script_operand(
        self, inv: Invocation, script: Field, positional: Sequence[Field], env: _Env, depth: int
    ) -> Content:
        if script.content is not None:
            return self.code(inv, script.content, env, depth, f"{inv.program} <(...)", positional)
        if script.text in ("/dev/stdin", "/proc/self/fd/0", "/dev/fd/0"):
            return self.stdin_code(inv, env, depth, positional)
        inv.runs_code = self.script_file(script, env)
        return Content("unknown")

    def script_file(self, script: Field, env: _Env) -> Content:
        path = None if script.dynamic else resolve_path(script.text, env.cwd, self.home)
        taint = env.files.get(path or "", frozenset()) | script.taint
        return Content("file", script.text, taint, script.text)

    def stdin_code(
        self, inv: Invocation, env: _Env, depth: int, positional: Sequence[Field] = ()
    ) -> Content:
        if inv.stdin.kind == "none":
            return NO_INPUT  # an interactive shell: nothing is known to run
        if inv.stdin.kind == "file":
            inv.runs_code = inv.stdin
            return Content("unknown")
        return self.code(inv, inv.stdin, env, depth, f"{inv.program} < stdin", positional)

    def interpreter(
        self, inv: Invocation, interp: knowledge.Interpreter, env: _Env, depth: int
    ) -> Content:
        code, script = _interpreter_code(inv, interp)
        label = inv.program or ""
        if code is None and script is None:
            if inv.stdin.kind == "none":
                return _output_of(inv)
            code = inv.stdin if inv.stdin.kind != "file" else None
            script = inv.stdin if code is None else None
        if code is None:
            assert script is not None
            inv.runs_code = script
            if script.kind == "file":
                inv.runs_code = self.script_file(lit(script.text), env)
            return Content("unknown", taint=inv.stdin.taint)
        inv.runs_code = code
        inv.code_lang = interp.lang
        if code.kind != "literal":
            return Content("unknown", taint=code.taint | inv.stdin.taint)
        from .interp import analyze_code

        facts = analyze_code(interp.lang, code.text)
        inv.code_facts = facts
        for text in facts.shell_strings:
            inner = env.copy()
            inner.stdin = NO_INPUT
            self.run_source(text, inner, depth + 1, (*inv.via, f"{label} code"))
        for argv in facts.argvs:
            if argv:
                self.sub(inv, [lit(x) for x in argv], env, depth, f"{label} code", NO_INPUT)
        for target, recursive in facts.delete_targets:
            argv = ["rm", "-rf", target] if recursive else ["rm", "-f", target]
            self.sub(inv, [lit(x) for x in argv], env, depth, f"{label} code", NO_INPUT)
        return Content("unknown", taint=inv.stdin.taint)

    # --- builtins and special programs ------------------------------------------------

    def b_cd(self, inv: Invocation, env: _Env, depth: int) -> Content:
        args = [a for a in inv.argv[1:] if not a.text.startswith("-") or a.dynamic]
        if not args:
            env.cwd = self.home
        elif args[0].dynamic:
            env.cwd = None
        else:
            env.cwd = resolve_path(args[0].text, env.cwd, self.home)
        env.vars["PWD"] = lit(env.cwd) if env.cwd else Field((("$PWD", True),))
        return NO_INPUT

    def b_alias(self, inv: Invocation, env: _Env, depth: int) -> Content:
        for a in inv.argv[1:]:
            name, eq, value = a.text.partition("=")
            if eq:
                env.aliases[name] = value
                if a.dynamic:
                    env.aliases[name] = _PLACEHOLDER
        return NO_INPUT

    def b_read(self, inv: Invocation, env: _Env, depth: int) -> Content:
        for a in inv.argv[1:]:
            if not a.text.startswith("-") and re.fullmatch(r"[A-Za-z_]\w*", a.text):
                env.vars[a.text] = Field(((f"${a.text}", True),))
        return NO_INPUT

    def b_eval(self, inv: Invocation, env: _Env, depth: int) -> Content:
        args = inv.argv[1:]
        if not args:
            return NO_INPUT
        joined = _join_with_spaces(args)
        return self.code(inv, _field_content(joined, "eval"), env, depth, "eval")

    def b_source(self, inv: Invocation, env: _Env, depth: int) -> Content:
        if len(inv.argv) < 2:
            return NO_INPUT
        return self.script_operand(inv, inv.argv[1], inv.argv[2:], env, depth)

    def b_xargs(self, inv: Invocation, env: _Env, depth: int) -> Content:
        args = list(inv.argv[1:])
        i = 0
        replace_str: str | None = None
        delimiter: str | None = None
        from_file = False
        while i < len(args):
            t = args[i].text
            if args[i].dynamic or not t.startswith("-") or t == "-":
                break
            if t == "--":
                i += 1
                break
            key, eq, value = t.partition("=")
            if key in ("-0", "--null"):
                delimiter = "\0"
            elif key == "-i" or (key.startswith("-i") and not key.startswith("--")):
                replace_str = t[2:] or "{}"
            elif key in ("-I", "--replace"):
                replace_str = value if eq else (args[i + 1].text if i + 1 < len(args) else "{}")
                i += 0 if eq else 1
            elif t.startswith("-I"):
                replace_str = t[2:]
            elif key in ("-d", "--delimiter"):
                raw = value if eq else (args[i + 1].text if i + 1 < len(args) else "\n")
                delimiter = words.decode_ansi_c(raw)
                i += 0 if eq else 1
            elif key in ("-a", "--arg-file"):
                from_file = True
                i += 0 if eq else 1
            elif key in knowledge.XARGS_OPTS_WITH_ARG and not eq:
                i += 1
            i += 1
        command = args[i:] or [lit("echo")]
        stdin = inv.stdin
        if from_file or stdin.kind != "literal":
            unknown = Field((("$(xargs input)", True),), taint=stdin.taint)
            if replace_str:
                argv = [_replace_in(f, replace_str, unknown) for f in command]
            else:
                argv = [*command, unknown]
            self.sub(inv, argv, env, depth, "xargs", NO_INPUT)
        else:
            items = words.xargs_words(stdin.text, delimiter)
            if replace_str:
                lines = [ln for ln in stdin.text.splitlines() if ln.strip()] or [""]
                for line in lines[:MAX_LOOP_VALUES]:
                    self.sub(
                        inv,
                        [_replace_in(f, replace_str, lit(line)) for f in command],
                        env,
                        depth,
                        "xargs",
                        NO_INPUT,
                    )
            else:
                self.sub(inv, [*command, *(lit(x) for x in items)], env, depth, "xargs", NO_INPUT)
        return Content("unknown", taint=stdin.taint)

    def b_find(self, inv: Invocation, env: _Env, depth: int) -> Content:
        args = list(inv.argv[1:])
        starts: list[Field] = []
        i = 0
        while i < len(args) and not (
            args[i].text.startswith(("-", "(", "!")) and not args[i].dynamic
        ):
            starts.append(args[i])
            i += 1
        starts = starts or [lit(".")]
        while i < len(args):
            t = args[i].text
            if t in knowledge.FIND_EXEC:
                j = i + 1
                while j < len(args) and args[j].text not in (";", "+"):
                    j += 1
                command = args[i + 1 : j]
                for start in starts[:MAX_LOOP_VALUES]:
                    self.sub(
                        inv,
                        [_replace_in(f, "{}", start) for f in command],
                        env,
                        depth,
                        f"find {t}",
                        NO_INPUT,
                    )
                i = j
            i += 1
        return _output_of(inv)

    def b_busybox(self, inv: Invocation, env: _Env, depth: int) -> Content:
        args = inv.argv[1:]
        if args and args[0].text in ("--list", "--help", "--list-full"):
            return NO_INPUT
        return self.sub(inv, args, env, depth, inv.program or "busybox")

    def b_ssh(self, inv: Invocation, env: _Env, depth: int) -> Content:
        args = list(inv.argv[1:])
        i = 0
        while i < len(args) and args[i].text.startswith("-") and not args[i].dynamic:
            t = args[i].text
            i += 2 if (t in knowledge.SSH_OPTS_WITH_ARG) else 1
        if i >= len(args):
            return Content("unknown")
        destination = args[i].text
        remote = args[i + 1 :]
        if not remote:
            return Content("unknown")
        joined = _join_with_spaces(remote)
        self.code(inv, _field_content(joined, "ssh"), env, depth, f"ssh {destination}")
        return Content("unknown")

    def b_exec(self, inv: Invocation, env: _Env, depth: int) -> Content:
        if len(inv.argv) == 1:
            env.out_redirects = env.out_redirects + tuple(r for r in inv.redirects if r.writes)
            return NO_INPUT
        return self.unwrap(inv, env, depth)

    # --- word expansion ---------------------------------------------------------------

    def expand(
        self, word: ir.Word, env: _Env, depth: int, via: tuple[str, ...], split: bool = True
    ) -> list[Field]:
        """Brace expansion, tilde, parameters, substitutions, then field splitting."""
        pieces: list[_Piece] = []
        for part in word.parts:
            pieces.extend(self.piece(part, env, depth, via))
        results: list[Field] = []
        for variant in _brace_variants(pieces):
            results.extend(_split_fields(variant, split))
        return results

    def piece(self, part: ir.Part, env: _Env, depth: int, via: tuple[str, ...]) -> list[_Piece]:
        if isinstance(part, ir.Lit):
            return [_Piece(part.text, part.quoted)]
        if isinstance(part, ir.Tilde):
            home = (
                self.home
                if not part.user
                else ("/root" if part.user == "root" else f"/home/{part.user}")
            )
            return [_Piece(home, True)]
        if isinstance(part, ir.Param):
            return [self.param(part, env)]
        if isinstance(part, ir.CmdSub):
            inner = env.copy()
            inner.stdin = NO_INPUT
            inner.out_redirects = ()
            out = self.run(part.body, inner, depth, (*via, "$(...)"))
            if out.kind == "literal":
                return [
                    _Piece(
                        out.text.rstrip("\n"),
                        part.quoted,
                        splittable=not part.quoted,
                        taint=out.taint,
                    )
                ]
            return [
                _Piece(
                    part.text,
                    part.quoted,
                    dynamic=True,
                    splittable=False,
                    taint=out.taint | {"cmdsub"},
                )
            ]
        if isinstance(part, ir.ProcSub):
            inner = env.copy()
            inner.stdin = NO_INPUT if part.direction == "<" else Content("unknown")
            inner.out_redirects = ()
            out = self.run(part.body, inner, depth, (*via, f"{part.direction}(...)"))
            content = out if part.direction == "<" else None
            return [_Piece("/dev/fd/63", True, content=content)]
        if isinstance(part, ir.Arith):
            return [_Piece(part.text, True, dynamic=True)]
        raise TypeError(part)

    def param(self, p: ir.Param, env: _Env) -> _Piece:
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
            value = self.join_fields(list(env.positional)) if env.positional else lit("")
        elif p.name == "#":
            value = lit(str(len(env.positional)))
        else:
            value = env.vars.get(p.name)
        # ${x:-default} of a variable known to be set is just its value.
        default_form = p.op.startswith((":-", "-")) and not p.op.startswith("-=")
        if default_form and value is not None and value.text and not value.dynamic:
            p = ir.Param(p.name, p.quoted, "", p.text)
        if value is None or p.op:
            return _Piece(shown, p.quoted, dynamic=True)
        if p.name == "IFS" and not p.quoted:
            return _Piece(" ", False, splittable=True)
        if value.dynamic:
            return _Piece(
                value.text if value.text.startswith("$") else shown,
                p.quoted,
                dynamic=True,
                taint=value.taint,
            )
        return _Piece(value.text, p.quoted, splittable=not p.quoted, taint=value.taint)

    def join_fields(self, fields: list[Field], name: str = "") -> Field:
        if not fields:
            return lit("")
        if len(fields) == 1:
            return fields[0]
        return _join_with_spaces(fields)


# --- helpers --------------------------------------------------------------------------


class _Piece(Record):
    __match_args__ = ("text", "quoted", "dynamic", "splittable", "taint", "content")
    __slots__ = __match_args__
    text: str
    quoted: bool
    dynamic: bool
    splittable: bool  # unquoted expansion result: subject to field splitting
    taint: frozenset[str]
    content: Content | None

    def __init__(
        self,
        text: str,
        quoted: bool,
        dynamic: bool = False,
        splittable: bool = False,
        taint: frozenset[str] = frozenset(),
        content: Content | None = None,
    ) -> None:
        init(self, "text", text)
        init(self, "quoted", quoted)
        init(self, "dynamic", dynamic)
        init(self, "splittable", splittable)
        init(self, "taint", taint)
        init(self, "content", content)


def _brace_variants(pieces: list[_Piece]) -> list[list[_Piece]]:
    """Brace expansion over the unquoted literal text, other pieces held in place."""
    if not any(not p.quoted and not p.dynamic and "{" in p.text for p in pieces):
        return [pieces]
    template: list[str] = []
    held: list[_Piece] = []
    for p in pieces:
        if not p.quoted and not p.dynamic and not p.splittable:
            template.append(p.text)
        else:
            template.append(chr(0xE000 + len(held)))
            held.append(p)
    variants = []
    for text in words.brace_expand("".join(template)):
        out: list[_Piece] = []
        buf: list[str] = []
        for c in text:
            code = ord(c) - 0xE000
            if 0 <= code < len(held):
                if buf:
                    out.append(_Piece("".join(buf), False))
                    buf = []
                out.append(held[code])
            else:
                buf.append(c)
        if buf:
            out.append(_Piece("".join(buf), False))
        variants.append(out)
    return variants


def _split_fields(pieces: list[_Piece], split: bool) -> list[Field]:
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
            chunks = re.split(r"[ \t\n]+", p.text)
            for index, chunk in enumerate(chunks):
                if index > 0:
                    close()
                if chunk:
                    segs.append((chunk, False))
                    glob = glob or bool(_GLOB_CHARS & set(chunk))
                    started = True
            taint |= p.taint
            continue
        if p.quoted or p.text or p.dynamic:
            started = True
        segs.append((p.text, p.dynamic))
        taint |= p.taint
        if not p.quoted and not p.dynamic and _GLOB_CHARS & set(p.text):
            glob = True
        if p.content is not None:
            content = p.content
    close()
    return fields


def _join_with_spaces(fields: Sequence[Field]) -> Field:
    return _join(fields, " ", glob=any(f.glob for f in fields))


def _join(fields: Sequence[Field], separator: str, glob: bool = False) -> Field:
    segs: list[tuple[str, bool]] = []
    for index, f in enumerate(fields):
        if index:
            segs.append((separator, False))
        segs.extend(f.segs)
    return Field(tuple(segs), glob, frozenset().union(*(f.taint for f in fields)))


def _replace_in(f: Field, token: str, value: Field) -> Field:
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


def _field_content(f: Field, what: str, newline: bool = False) -> Content:
    """A field used as text (code for ``sh -c``, a here-string). Unknown pieces that came
    from a variable become an unknown word in the code; text from a command substitution
    makes the whole text unknown (it could be any code)."""
    if f.content is not None:
        return f.content
    if not f.dynamic:
        return Content("literal", f.text + ("\n" if newline else ""), f.taint, what)
    if "cmdsub" in f.taint or "download" in f.taint:
        return Content("unknown", "", f.taint, what)
    text = "".join(f"${{{_PLACEHOLDER}}}" if d else t for t, d in f.segs)
    return Content("literal", text, f.taint, what)


def _concat(outputs: list[Content]) -> Content:
    real = [o for o in outputs if o.kind != "none"]
    if not real:
        return NO_INPUT
    taint = frozenset().union(*(o.taint for o in real))
    if all(o.kind == "literal" for o in real):
        return Content("literal", "".join(o.text for o in real), taint)
    return Content("unknown", "", taint)


def _interpreter_code(
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
        return _field_content(_join(code_parts, "\n"), f"{inv.program} code"), None
    if interp.program_is_first_arg and operands:
        return _field_content(operands[0], f"{inv.program} program"), None
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


def _output_of(inv: Invocation) -> Content:
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
    if program in knowledge.DOWNLOADERS:
        return Content("unknown", taint=stdin.taint | {"download"}, source=source)
    taint = stdin.taint | ({"decoded"} if program in knowledge.DECODERS else frozenset())
    return Content("unknown", taint=taint, source=source)


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


def _forks(stmt: ir.Stmt, name: str, forking: bool = False) -> bool:
    """Does ``stmt`` call function ``name`` from inside a pipe or in the background?"""
    if isinstance(stmt, ir.Command):
        return forking and bool(stmt.words) and stmt.words[0].text == name
    if isinstance(stmt, ir.Pipeline):
        return any(_forks(s, name, True) for s in stmt.stages)
    if isinstance(stmt, ir.Background):
        return _forks(stmt.stmt, name, True)
    if isinstance(stmt, ir.Seq):
        return any(_forks(s, name, forking) for s in stmt.items)
    if isinstance(stmt, ir.Block):
        return _forks(stmt.body, name, forking or stmt.subshell)
    if isinstance(stmt, ir.For):
        return _forks(stmt.body, name, forking)
    if isinstance(stmt, ir.FuncDef):
        return False
    return False


_HANDLERS = {
    "cd": _Analyzer.b_cd,
    "pushd": _Analyzer.b_cd,
    "alias": _Analyzer.b_alias,
    "read": _Analyzer.b_read,
    "eval": _Analyzer.b_eval,
    "source": _Analyzer.b_source,
    ".": _Analyzer.b_source,
    "xargs": _Analyzer.b_xargs,
    "find": _Analyzer.b_find,
    "busybox": _Analyzer.b_busybox,
    "toybox": _Analyzer.b_busybox,
    "ssh": _Analyzer.b_ssh,
    "exec": _Analyzer.b_exec,
}
