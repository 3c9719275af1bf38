"""The walk over a parsed shell program: statements in order, each simple command
looked up (alias, function, builtin, wrapper, shell, interpreter, program) and recorded
as an `Invocation`, with what it writes to stdout worked out where it can be."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from .. import ir, knowledge
from ..facts import (
    NO_INPUT,
    Content,
    Field,
    Invocation,
    Note,
    Redir,
    lit,
    program_name,
    resolve_path,
    show,
    unknown_var,
)
from ..limits import Budget
from . import outputs, runners
from .builtins import BUILTINS
from .commandargs import run_command_args, run_env_commands
from .expand import concat, expand, expand_one, field_content, join_with_spaces
from .state import MAX_DEPTH, MAX_INVOCATIONS, MAX_LOOP_VALUES, Env, Func


class Analyzer:
    """Walks one command line. ``calls`` is the stack of functions being run (a call
    already on it is recursion)."""

    def __init__(self, home: str, budget: Budget) -> None:
        self.home = home
        self.budget = budget
        self.invocations: list[Invocation] = []
        self.notes: list[Note] = []
        self.calls: list[str] = []

    def note(self, kind: str, text: str, forks: bool = False) -> None:
        if not any(n.kind == kind and n.text == text for n in self.notes):
            self.notes.append(Note(kind, text, forks))

    def finish(self, env: Env) -> None:
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

    def run_source(self, source: str, env: Env, depth: int, via: tuple[str, ...]) -> Content:
        if depth > MAX_DEPTH:
            self.note("too_deep", source[:200])
            return Content("unknown")
        # Here, not at the top: `agentvisor exec -- CMD` analyses argvs without a parser.
        from ..parse import parse

        result = parse(source, self.budget)
        if result.errors:
            self.note("unparsed", source[:200])
        return self.run(result.seq, env, depth, via)

    def run(self, stmt: ir.Stmt, env: Env, depth: int, via: tuple[str, ...]) -> Content:
        self.budget.step()
        self.budget.enter()
        try:
            return self._run(stmt, env, depth, via)
        finally:
            self.budget.leave()

    def _run(self, stmt: ir.Stmt, env: Env, depth: int, via: tuple[str, ...]) -> Content:
        if len(self.invocations) > MAX_INVOCATIONS:
            self.note("too_many", "more commands than can be judged")
            return Content("unknown")
        if isinstance(stmt, ir.Command):
            return self.run_command(stmt, env, depth, via)
        if isinstance(stmt, ir.Seq):
            return concat([self.run(s, env, depth, via) for s in stmt.items])
        if isinstance(stmt, ir.Pipeline):
            return self.run_pipeline(stmt, env, depth, via)
        if isinstance(stmt, ir.Background):
            return self.run(stmt.stmt, env.copy(), depth, via)
        if isinstance(stmt, ir.Block):
            return self.run_block(stmt, env, depth, via)
        if isinstance(stmt, ir.Assign):
            assign(self, stmt, env, depth, via)
            return NO_INPUT
        if isinstance(stmt, ir.For):
            return self.run_for(stmt, env, depth, via)
        if isinstance(stmt, ir.FuncDef):
            env.funcs[stmt.name] = Func(stmt.body, _forks(stmt.body, stmt.name))
            return NO_INPUT
        if isinstance(stmt, ir.Evaluate):
            for w in stmt.words:
                expand(self, w, env, depth, via)
            return Content("unknown")
        if isinstance(stmt, ir.Unparsed):
            self.note("unparsed", stmt.text[:200])
            return Content("unknown")
        raise TypeError(f"unknown statement {stmt!r}")

    def run_pipeline(
        self, stmt: ir.Pipeline, env: Env, depth: int, via: tuple[str, ...]
    ) -> Content:
        stdin = env.stdin
        out = NO_INPUT
        for stage in stmt.stages:
            stage_env = env.copy()
            stage_env.stdin = stdin
            out = self.run(stage, stage_env, depth, via)
            stdin = out
        return out

    def run_block(self, stmt: ir.Block, env: Env, depth: int, via: tuple[str, ...]) -> Content:
        if stmt.endless_forks:
            self.note("fork_loop", " ".join(via) or "loop", forks=True)
        inner = env.copy() if stmt.subshell else env
        saved = (inner.stdin, inner.out_redirects)
        stdin, outs = take_redirects(self, stmt.redirects, inner, depth, via)
        if stdin is not None:
            inner.stdin = stdin
        inner.out_redirects = inner.out_redirects + outs
        out = self.run(stmt.body, inner, depth, via)
        inner.stdin, inner.out_redirects = saved
        return NO_INPUT if any(r.writes and r.fd in (None, 1) for r in outs) else out

    def run_for(self, stmt: ir.For, env: Env, depth: int, via: tuple[str, ...]) -> Content:
        values: list[Field] | None = None
        if stmt.values is not None:
            values = []
            for w in stmt.values:
                values.extend(expand(self, w, env, depth, via))
            if len(values) > MAX_LOOP_VALUES or any(v.dynamic for v in values):
                values = None
        if stmt.var is None or values is None:
            if stmt.var:
                env.vars[stmt.var] = unknown_var(stmt.var)
            return self.run(stmt.body, env, depth, via)
        out: list[Content] = []
        for value in values or [lit("")]:
            env.vars[stmt.var] = value
            out.append(self.run(stmt.body, env, depth, via))
        return concat(out)

    # --- commands ---------------------------------------------------------------------

    def run_command(self, cmd: ir.Command, env: Env, depth: int, via: tuple[str, ...]) -> Content:
        fields: list[Field] = []
        for w in cmd.words:
            fields.extend(expand(self, w, env, depth, via))
        assigns: list[tuple[str, Field]] = []
        for name, value in cmd.assigns:
            v = expand_one(self, value, env, depth, via) if value is not None else lit("")
            assigns.append((name, v))
        stdin, outs = take_redirects(self, cmd.redirects, env, depth, via)
        redirs = env.out_redirects + outs
        if not fields:
            for name, v in assigns:
                env.vars[name] = v
            if redirs:
                self.emit(Invocation((), "", redirs, stdin or env.stdin, env.cwd, via))
            return stdin or NO_INPUT
        out = self.dispatch(
            tuple(fields), redirs, stdin or env.stdin, env, depth, via, assigns=assigns
        )
        if any(r.writes and r.fd in (None, 1) for r in outs):
            remember_writes(self, outs, out, env)
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
        env: Env,
        depth: int,
        via: tuple[str, ...],
        assigns: Sequence[tuple[str, Field]] = (),
    ) -> Content:
        """Run one simple command: look it up as alias, function, builtin, wrapper, shell,
        interpreter or program, record it, and return what it writes to stdout."""
        env_assigns = tuple(f"{n}={v.text}" for n, v in assigns)
        if depth > MAX_DEPTH:
            self.note("too_deep", " ".join(f.text for f in fields)[:200])
            return Content("unknown")
        head = fields[0]
        if head.dynamic or head.glob:
            self.emit(
                Invocation(fields, None, redirs, stdin, env.cwd, via, env_assigns=env_assigns)
            )
            if head.glob and not head.dynamic:
                glob_program(self, head.text, fields, redirs, stdin, env, depth, via)
            return Content("unknown", taint=stdin.taint | head.taint)
        name = head.text
        if name in env.aliases and f"alias {name}" not in via:
            source = env.aliases[name] + " " + " ".join(show(f.text) for f in fields[1:])
            return self.run_source(source, env, depth + 1, (*via, f"alias {name}"))
        if name in env.funcs:
            return self.call_function(name, fields, env, depth, via)
        program = program_name(name)
        inv = self.emit(
            Invocation(fields, program, redirs, stdin, env.cwd, via, env_assigns=env_assigns)
        )
        if program in knowledge.DOWNLOADERS:
            outputs.record_download(inv, env, self.home)
        if program == "tee":
            outputs.record_tee(inv, env, self.home)
        if "/" in name:
            path = resolve_path(name, env.cwd, self.home)
            if path in env.files:
                inv.runs_code = Content("file", path, env.files[path], path)
            elif path in env.written:  # `echo CMD > x.sh; ./x.sh`
                return self.code(inv, env.written[path], env, depth, f"{name} (written here)")
        run_env_commands(self, inv, assigns, env, depth)
        run_command_args(self, inv, env, depth)
        handler = BUILTINS.get(program) or runners.runner_for(program)
        if handler is not None:
            return handler(self, inv, env, depth)
        return outputs.output_of(inv)

    def call_function(
        self, name: str, fields: tuple[Field, ...], env: Env, depth: int, via: tuple[str, ...]
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
        env: Env,
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
        env: Env,
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


def glob_program(
    a: Analyzer,
    pattern: str,
    fields: tuple[Field, ...],
    redirs: tuple[Redir, ...],
    stdin: Content,
    env: Env,
    depth: int,
    via: tuple[str, ...],
) -> None:
    """``/bin/r? -rf /``: judge the command as each known program the glob can name."""
    name = pattern.rsplit("/", 1)[-1]
    matches = [c for c in knowledge.GLOB_CANDIDATES if fnmatch.fnmatchcase(c, name)]
    # A glob that could be anything (`*`) stays what it is: a program known only when it runs.
    if len(matches) > 3 or not re.sub(r"\[[^]]*\]|[*?]", "", name):
        return
    for candidate in matches:
        argv = (lit(candidate), *fields[1:])
        a.dispatch(argv, redirs, stdin, env, depth + 1, (*via, f"glob {pattern}"))


def remember_writes(a: Analyzer, outs: Sequence[Redir], out: Content, env: Env) -> None:
    """What a command printed into a file, when it is known: running the file later runs
    that text (`echo 'CMD' > x.sh; sh x.sh`)."""
    for r in outs:
        if r.writes and r.fd in (None, 1) and r.target is not None and not r.target.dynamic:
            path = resolve_path(r.target.text, env.cwd, a.home)
            if path and out.kind == "literal":
                env.written[path] = out


def assign(a: Analyzer, stmt: ir.Assign, env: Env, depth: int, via: tuple[str, ...]) -> None:
    if stmt.items is not None:
        assign_array(a, stmt.name, stmt.items, env, depth, via)
    elif stmt.dynamic or stmt.value is None:
        env.vars[stmt.name] = unknown_var(stmt.name)
    else:
        env.vars[stmt.name] = expand_one(a, stmt.value, env, depth, via)
    value = env.vars[stmt.name]
    if stmt.name in knowledge.HISTORY_VARS and (
        stmt.name == "HISTFILE" or value.dynamic or value.text in ("", "0")
    ):
        a.note("history_off", stmt.name)
    if stmt.name in knowledge.COMMAND_ENV and stmt.value is not None:
        # Exported (now or later), programs run it: `PAGER='cmd'; export PAGER`.
        inv = Invocation((), "", (), NO_INPUT, env.cwd, via)
        run_env_commands(a, inv, [(stmt.name, env.vars[stmt.name])], env, depth)
        if inv.runs_code is not None:
            a.emit(inv)


def assign_array(
    a: Analyzer, name: str, items: Sequence[ir.Word], env: Env, depth: int, via: tuple[str, ...]
) -> None:
    """``name=(a b c)``: ``${name[@]}`` is the items, ``$name`` the first."""
    fields = [f for w in items for f in expand(a, w, env, depth, via)]
    env.vars[f"{name}[@]"] = join_with_spaces(fields) if fields else lit("")
    env.vars[name] = fields[0] if fields else lit("")


def take_redirects(
    a: Analyzer, redirects: Sequence[ir.Redirect], env: Env, depth: int, via: tuple[str, ...]
) -> tuple[Content | None, tuple[Redir, ...]]:
    stdin: Content | None = None
    outs: list[Redir] = []
    for r in redirects:
        if r.heredoc is not None:
            text = expand_one(a, r.heredoc, env, depth, via)
            stdin = field_content(text, "here-document")
            continue
        target = None
        if r.target is not None:
            target = expand_one(a, r.target, env, depth, via)
        if r.op == "<<<":
            if target is not None:
                stdin = field_content(target, "here-string", newline=True)
            continue
        redir = Redir(r.op, target, r.fd)
        if redir.reads and target is not None and r.fd in (None, 0):
            # `sh < <(cmd)`: what the process substitution prints is the input.
            stdin = target.content or Content("file", target.text, target.taint, target.text)
        outs.append(redir)
    return stdin, tuple(outs)


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
    return False
