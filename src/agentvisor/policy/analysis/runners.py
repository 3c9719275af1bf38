"""Programs that run other programs: wrappers (read from `knowledge.WRAPPERS`, one
loop for all of them), shells and interpreters (`knowledge.SHELLS`, `INTERPRETERS`)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

from .. import knowledge
from ..facts import NO_INPUT, Content, Field, Invocation, lit, resolve_path
from ..lazyre import regex
from .commandargs import run_env_commands, tail
from .expand import field_content
from .outputs import interpreter_code, output_of
from .state import Env

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from .walk import Analyzer

_ASSIGN_RE = r"^[A-Za-z_][A-Za-z0-9_]*="

Runner = Callable[["Analyzer", Invocation, Env, int], Content]


def runner_for(program: str) -> Runner | None:
    """How the walk follows ``program`` into what it runs (None: it runs nothing known)."""
    if program in knowledge.WRAPPERS:
        return unwrap
    if program in knowledge.SHELLS:
        return shell
    if knowledge.interpreter(program) is not None:
        return interpreter
    return None


def _string_opt(t: str, key: str, opts: frozenset[str]) -> bool:
    """Is ``t`` one of ``opts``, alone or last in a cluster of short options (``-lc``)?"""
    return key in opts or (not t.startswith("--") and len(t) > 2 and f"-{t[-1]}" in opts)


def unwrap(
    a: Analyzer, inv: Invocation, env: Env, depth: int, args: list[Field] | None = None
) -> Content:
    program = inv.program or ""
    spec = knowledge.WRAPPERS[program]
    args = list(inv.argv[1:]) if args is None else args
    i = 0
    exec_flag = False
    while i < len(args):
        f = args[i]
        t = f.text
        if f.dynamic:
            break
        if t == "--":
            i += 1
            break
        if spec.assignments and regex(_ASSIGN_RE).match(t):
            name = t.partition("=")[0]
            run_env_commands(a, inv, [(name, tail(f, len(name) + 1))], env, depth)
            i += 1
            continue
        if (spec.login_dash and t == "-") or (
            spec.numeric_opts and t.startswith("-") and t[1:].isdigit()
        ):
            i += 1
            continue
        if not t.startswith("-") or t == "-":
            break
        key, _, value = t.partition("=")
        if key in spec.no_command_opts:
            return Content("unknown")
        exec_flag = exec_flag or key in spec.exec_opts
        shell_string = _string_opt(t, key, spec.shell_string_opts)
        if shell_string or _string_opt(t, key, spec.split_string_opts):
            text_field = lit(value) if value else (args[i + 1] if i + 1 < len(args) else None)
            if text_field is None:
                return NO_INPUT
            if not shell_string:
                rest = args[i + (1 if value else 2) :]
                return _split_string(a, inv, text_field, rest, env, depth)
            code = field_content(text_field, program)
            return a.code(inv, code, env, depth, f"{program} {key}")
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
    return _run_operands(a, inv, spec, args[i:], exec_flag, env, depth)


def _run_operands(
    a: Analyzer,
    inv: Invocation,
    spec: knowledge.Wrapper,
    operands: list[Field],
    exec_flag: bool,
    env: Env,
    depth: int,
) -> Content:
    program = inv.program or ""
    if spec.user_operand and operands and not operands[0].text.startswith("-"):
        operands = operands[1:]  # the user; what follows goes to the user's shell
        if operands:
            return _shell_args(a, inv, operands, env, depth)
        return a.sub(inv, [lit("sh")], env, depth, program)
    if (
        spec.options_after_skip
        and len(operands) > spec.skip
        and operands[spec.skip].text.startswith("-")
    ):
        return unwrap(a, inv, env, depth, operands[spec.skip :])
    operands = operands[spec.skip :]
    if not operands:
        if spec.default:
            argv = [lit("sh") if x == "$SHELL" else lit(x) for x in spec.default]
            return a.sub(inv, argv, env, depth, program)
        return NO_INPUT
    if spec.joins_to_shell and not exec_flag:
        text = " ".join(f.text for f in operands)
        joined = Field(
            ((text, any(f.dynamic for f in operands)),),
            taint=frozenset[str]().union(*(f.taint for f in operands)),
        )
        return a.code(inv, field_content(joined, program), env, depth, program)
    return a.sub(inv, operands, env, depth, program)


def _split_string(
    a: Analyzer, inv: Invocation, text: Field, rest: Sequence[Field], env: Env, depth: int
) -> Content:
    """``env -S 'prog args'``: the string is split into words, not run by a shell."""
    if text.dynamic:
        inv.runs_code = Content("unknown", taint=text.taint, source="env -S")
        return Content("unknown")
    try:
        parts = shlex.split(text.text)
    except ValueError:
        parts = text.text.split()
    return a.sub(inv, [lit(p) for p in parts] + list(rest), env, depth, "env -S")


def shell(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    args = list(inv.argv[1:])
    i = 0
    command_mode = read_stdin = False
    while i < len(args):
        f = args[i]
        t = f.text
        if f.dynamic:
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
        return a.code(
            inv,
            field_content(operands[0], "shell -c"),
            env,
            depth,
            f"{inv.program} -c",
            positional=operands[2:],
            arg0=operands[1] if len(operands) > 1 else None,
        )
    if operands and not read_stdin:
        return script_operand(a, inv, operands[0], operands[1:], env, depth)
    return _stdin_code(a, inv, env, depth, positional=operands)


def _shell_args(
    a: Analyzer, inv: Invocation, args: Sequence[Field], env: Env, depth: int
) -> Content:
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
    return shell(a, fake, env, depth)


def script_operand(
    a: Analyzer,
    inv: Invocation,
    script: Field,
    positional: Sequence[Field],
    env: Env,
    depth: int,
) -> Content:
    if script.content is not None:
        return a.code(inv, script.content, env, depth, f"{inv.program} <(...)", positional)
    if script.text in ("/dev/stdin", "/proc/self/fd/0", "/dev/fd/0"):
        return _stdin_code(a, inv, env, depth, positional)
    path = None if script.dynamic else resolve_path(script.text, env.cwd, a.home)
    if path in env.written:  # written earlier in this command line: its text is known
        label = f"{inv.program} {script.text} (written here)"
        return a.code(inv, env.written[path], env, depth, label, positional)
    inv.runs_code = _script_file(a, script, env)
    return Content("unknown")


def _script_file(a: Analyzer, script: Field, env: Env) -> Content:
    path = None if script.dynamic else resolve_path(script.text, env.cwd, a.home)
    taint = env.files.get(path or "", frozenset()) | script.taint
    return Content("file", script.text, taint, script.text)


def _stdin_code(
    a: Analyzer, inv: Invocation, env: Env, depth: int, positional: Sequence[Field] = ()
) -> Content:
    if inv.stdin.kind == "none":
        return NO_INPUT  # an interactive shell: nothing is known to run
    if inv.stdin.kind == "file":
        inv.runs_code = inv.stdin
        return Content("unknown")
    return a.code(inv, inv.stdin, env, depth, f"{inv.program} < stdin", positional)


def interpreter(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    interp = knowledge.interpreter(inv.program or "")
    assert interp is not None  # runner_for chose this runner because there is one
    code, script = interpreter_code(inv, interp)
    label = inv.program or ""
    if code is None and script is None:
        if inv.stdin.kind == "none":
            return output_of(inv)
        code = inv.stdin if inv.stdin.kind != "file" else None
        script = inv.stdin if code is None else None
    if code is None:
        assert script is not None
        inv.runs_code = script
        if script.kind == "file":
            inv.runs_code = _script_file(a, lit(script.text), env)
        return Content("unknown", taint=inv.stdin.taint)
    inv.runs_code = code
    inv.code_lang = interp.lang
    if code.kind != "literal":
        return Content("unknown", taint=code.taint | inv.stdin.taint)
    from ..interp import analyze_code  # here: it imports ast, which only inline code needs

    facts = analyze_code(interp.lang, code.text)
    inv.code_facts = facts
    for text in facts.shell_strings:
        inner = env.copy()
        inner.stdin = NO_INPUT
        a.run_source(text, inner, depth + 1, (*inv.via, f"{label} code"))
    for argv in facts.argvs:
        if argv:
            a.sub(inv, [lit(x) for x in argv], env, depth, f"{label} code", NO_INPUT)
    for target, recursive in facts.delete_targets:
        argv = ["rm", "-rf", target] if recursive else ["rm", "-f", target]
        a.sub(inv, [lit(x) for x in argv], env, depth, f"{label} code", NO_INPUT)
    return Content("unknown", taint=inv.stdin.taint)
