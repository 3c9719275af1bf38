"""Shell builtins and programs whose arguments hold a command (xargs, find -exec, ssh,
busybox), each a small function in the `BUILTINS` table the walk looks programs up in."""

from __future__ import annotations

import re
from collections.abc import Callable

from .. import knowledge, words
from ..facts import NO_INPUT, Content, Field, Invocation, lit, resolve_path, unknown_var
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
    "eval": _eval,
    "source": _source,
    ".": _source,
    "xargs": _xargs,
    "find": _find,
    "busybox": _busybox,
    "toybox": _busybox,
    "ssh": _ssh,
    "exec": _exec,
}
