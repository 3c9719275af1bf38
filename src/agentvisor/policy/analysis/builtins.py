"""Shell builtins and programs whose arguments hold a command (xargs, find -exec, ssh,
busybox), each a small function in the `BUILTINS` table the walk looks programs up in."""

from __future__ import annotations

import re
from collections.abc import Callable

from .. import knowledge, words
from ..facts import NO_INPUT, Content, Field, Invocation, lit, resolve_path, show, unknown_var
from . import runners
from .expand import field_content, join_with_spaces, replace_in
from .outputs import output_of
from .state import MAX_LOOP_VALUES, PLACEHOLDER, Env

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from .walk import Analyzer

Handler = Callable[["Analyzer", Invocation, Env, int], Content]


def _cd(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    args = [f for f in inv.argv[1:] if not f.text.startswith("-") or f.dynamic]
    if not args:
        env.cwd = a.home
    elif args[0].dynamic:
        env.cwd = None
    else:
        env.cwd = resolve_path(args[0].text, env.cwd, a.home)
    env.vars["PWD"] = lit(env.cwd) if env.cwd else unknown_var("PWD")
    return NO_INPUT


def _alias(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    for f in inv.argv[1:]:
        name, eq, value = f.text.partition("=")
        if eq:
            env.aliases[name] = PLACEHOLDER if f.dynamic else value
    return NO_INPUT


def _trap(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    """``trap 'CMD' SIGNAL...``: CMD runs when the signal (or EXIT) comes."""
    args = [f for f in inv.argv[1:] if f.text != "--"]
    if len(args) < 2 or args[0].text in ("-", "-l", "-p", ""):
        return NO_INPUT
    return a.code(inv, field_content(args[0], "trap"), env, depth, "trap")


def _set(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    """``set -- ARGS`` (or ``set ARGS``): the positional parameters from now on."""
    args = list(inv.argv[1:])
    if "--" in [f.text for f in args]:
        env.positional = tuple(args[[f.text for f in args].index("--") + 1 :])
    elif args and not args[0].text.startswith(("-", "+")):
        env.positional = tuple(args)
    return NO_INPUT


def _parallel(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    """GNU parallel: a command template and the arguments after ``:::`` (or its input);
    with no template each argument is a command line. It runs them through a shell."""
    args = list(inv.argv[1:])
    i = 0
    while i < len(args) and args[i].text.startswith("-") and not args[i].dynamic:
        i += 2 if args[i].text in knowledge.PARALLEL_OPTS_WITH_ARG else 1
    texts = [f.text for f in args[i:]]
    cut = next((j for j, t in enumerate(texts) if t.startswith(":::")), len(texts))
    template = texts[:cut]  # joined with spaces and run by a shell, as parallel does
    values = [t for t in texts[cut:] if not t.startswith(":::")][:MAX_LOOP_VALUES]
    if cut == len(texts):  # arguments come from the input, one a line
        stdin = inv.stdin
        values = stdin.text.splitlines()[:MAX_LOOP_VALUES] if stdin.kind == "literal" else []
        if stdin.kind not in ("literal", "none"):
            values = ["$(parallel input)"]
    for value in values or [""]:
        line = " ".join(template)
        line = line if "{}" in line else f"{line} {show(value)}"
        text = line.replace("{}", show(value)) if template else value
        if text.strip():
            _run_line(a, inv, text, env, depth, "parallel")
    return Content("unknown", taint=inv.stdin.taint)


def _run_line(a: Analyzer, inv: Invocation, text: str, env: Env, depth: int, label: str) -> None:
    inner = env.copy()
    inner.stdin = NO_INPUT
    a.run_source(text, inner, depth + 1, (*inv.via, label))


def _read(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    for f in inv.argv[1:]:
        if not f.text.startswith("-") and re.fullmatch(r"[A-Za-z_]\w*", f.text):
            env.vars[f.text] = unknown_var(f.text)
    return NO_INPUT


def _eval(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    args = inv.argv[1:]
    if not args:
        return NO_INPUT
    return a.code(inv, field_content(join_with_spaces(args), "eval"), env, depth, "eval")


def _coproc(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    """``coproc [NAME] COMMAND``: bash runs COMMAND, as its words, in the background.
    tree-sitter reads the keyword as a program's name, so the words after it are the
    command (a NAME before a ``{`` group, and the ``{``, are dropped: the group's first
    command ends at its ``;``, and the rest comes as statements of their own)."""
    args = inv.argv[1:]
    if len(args) > 1 and args[1].text == "{" and _NAME.fullmatch(args[0].text):
        args = args[1:]
    if args and args[0].text == "{":
        args = args[1:]
    if not args:
        return NO_INPUT
    return a.dispatch(tuple(args), inv.redirects, inv.stdin, env, depth + 1, (*inv.via, "coproc"))


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _source(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    if len(inv.argv) < 2:
        return NO_INPUT
    return runners.script_operand(a, inv, inv.argv[1], inv.argv[2:], env, depth)


def _xargs(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    args = list(inv.argv[1:])
    i = 0
    replace_str: str | None = None
    delimiter: str | None = None
    from_file = False
    stdin = inv.stdin
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
            source = lit(value) if eq else (args[i + 1] if i + 1 < len(args) else lit(""))
            from_file = source.content is None or source.content.kind != "literal"
            stdin = source.content if not from_file and source.content else stdin
            i += 0 if eq else 1
        elif key in knowledge.XARGS_OPTS_WITH_ARG and not eq:
            i += 1
        i += 1
    command = args[i:] or [lit("echo")]
    if from_file or stdin.kind != "literal":
        unknown = Field((("$(xargs input)", True),), taint=stdin.taint)
        if replace_str:
            argv = [replace_in(f, replace_str, unknown) for f in command]
        else:
            argv = [*command, unknown]
        a.sub(inv, argv, env, depth, "xargs", NO_INPUT)
    elif replace_str:
        lines = [ln for ln in stdin.text.splitlines() if ln.strip()] or [""]
        for line in lines[:MAX_LOOP_VALUES]:
            argv = [replace_in(f, replace_str, lit(line)) for f in command]
            a.sub(inv, argv, env, depth, "xargs", NO_INPUT)
    else:
        items = words.xargs_words(stdin.text, delimiter)
        a.sub(inv, [*command, *(lit(x) for x in items)], env, depth, "xargs", NO_INPUT)
    return Content("unknown", taint=stdin.taint)


def _find(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    args = list(inv.argv[1:])
    starts: list[Field] = []
    i = 0
    while i < len(args) and not (args[i].text.startswith(("-", "(", "!")) and not args[i].dynamic):
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
                argv = [replace_in(f, "{}", start) for f in command]
                a.sub(inv, argv, env, depth, f"find {t}", NO_INPUT)
            i = j
        i += 1
    return output_of(inv)


def _busybox(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    args = inv.argv[1:]
    if args and args[0].text in ("--list", "--help", "--list-full"):
        return NO_INPUT
    return a.sub(inv, args, env, depth, inv.program or "busybox")


def _ssh(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    args = list(inv.argv[1:])
    i = 0
    while i < len(args) and args[i].text.startswith("-") and not args[i].dynamic:
        i += 2 if (args[i].text in knowledge.SSH_OPTS_WITH_ARG) else 1
    if i >= len(args):
        return Content("unknown")
    destination = args[i].text
    remote = args[i + 1 :]
    if not remote:
        return Content("unknown")
    code = field_content(join_with_spaces(remote), "ssh")
    a.code(inv, code, env, depth, f"ssh {destination}")
    return Content("unknown")


def _exec(a: Analyzer, inv: Invocation, env: Env, depth: int) -> Content:
    if len(inv.argv) == 1:
        env.out_redirects = env.out_redirects + tuple(r for r in inv.redirects if r.writes)
        return NO_INPUT
    return runners.unwrap(a, inv, env, depth)


BUILTINS: dict[str, Handler] = {
    "cd": _cd,
    "pushd": _cd,
    "alias": _alias,
    "read": _read,
    "set": _set,
    "trap": _trap,
    "parallel": _parallel,
    "eval": _eval,
    "coproc": _coproc,
    "source": _source,
    ".": _source,
    "xargs": _xargs,
    "find": _find,
    "busybox": _busybox,
    "toybox": _busybox,
    "ssh": _ssh,
    "exec": _exec,
}
