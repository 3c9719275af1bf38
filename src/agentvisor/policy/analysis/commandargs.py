"""Commands hidden in the arguments of other programs (`knowledge.COMMAND_ARGS`): sed's
``e``, tar's ``--to-command``, git's ``-c core.pager=``, vim's ``-c '!cmd'``, ssh's
``ProxyCommand``, make's ``SHELL=`` ... and environment variables that hold a command
(`knowledge.COMMAND_ENV`). Each is taken out of its value and analysed as a command line
run by the program, so it is judged like any other command."""

from __future__ import annotations

import fnmatch
import re
import shlex
from collections.abc import Callable, Iterator, Sequence

from .. import knowledge
from ..facts import NO_INPUT, Content, Field, Invocation, lit
from ..lazyre import regex
from .expand import field_content
from .state import Env

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from .walk import Analyzer

_SED_E = (
    r"(?:^|[;\n{}])\s*(?:[0-9$]+|/[^/\n]*/)?(?:\s*,\s*(?:[0-9$]+|/[^/\n]*/))?\s*!?\s*e\s+([^\n]+)"
)
_SED_S = r"s(.)((?:\\.|(?!\1).)*)\1((?:\\.|(?!\1).)*)\1([gpeIiMm0-9w]*)"
_SED_BARE_E = r"(?:^|[;\n{}])\s*e\s*(?:$|[;\n}])"
_SYSTEM_CALL = r"\bsystem(?:list)?\s*\(\s*(['\"])((?:\\.|(?!\1).)*)\1"
_LISP = (
    r"\((?:async-|start-process-|call-process-)?shell-command[\w-]*\s+"
    r"(?:[^\"()]*\s+)?\"((?:\\.|[^\"\\])*)\""
)
_EXPECT = r"(?:^|[;\n\[{])\s*(?:spawn|exec)\s+([^;\n\]}]+)"
_MAKE_SHELL = r"\$[({]shell\s+([^)}]*)[)}]"
_MAKE_RULE = r"^[^\t#=:\n]+:[^=;\n]*;(.*)$"


def run_command_args(a: Analyzer, inv: Invocation, env: Env, depth: int) -> None:
    program = inv.program or ""
    for spec in knowledge.COMMAND_ARGS.get(program, ()):
        for label, value in _values(spec, inv):
            content = field_content(value, f"{program} {label}")
            if content.kind != "literal":
                if label != "@any":  # every argument is looked at, not every one is code
                    inv.runs_code = content  # a command only known when it runs
                continue
            for text in FORMS[spec.form](content.text, spec, inv):
                _run(a, inv, text, env, depth, f"{program} {label}")


def run_env_commands(
    a: Analyzer, inv: Invocation, assigns: Sequence[tuple[str, Field]], env: Env, depth: int
) -> None:
    """``GIT_SSH_COMMAND='...' git fetch``: the value is a command the program runs."""
    for name, value in assigns:
        if name in knowledge.COMMAND_ENV:
            content = field_content(value, name)
            if content.kind == "literal":
                _run(a, inv, content.text, env, depth, name)
            else:
                inv.runs_code = content


def _run(a: Analyzer, inv: Invocation, text: str, env: Env, depth: int, label: str) -> None:
    inner = env.copy()
    inner.stdin = NO_INPUT
    a.run_source(text, inner, depth + 1, (*inv.via, label))


def _values(spec: knowledge.CommandArg, inv: Invocation) -> Iterator[tuple[str, Field]]:
    """(label, value) of each place in ``inv`` where ``spec`` says a command may be."""
    args = inv.argv[1:]
    found = False
    for index, f in enumerate(args):
        t = f.text
        for name in spec.names:
            value = _option_value(name, t, args, index, f)
            if value is not None:
                found = True
                yield name, value
    if "@first" in spec.names and not found:
        first = next((f for f in args if not f.text.startswith("-")), None)
        if first is not None:
            yield "script", first
    if "@stdin" in spec.names and inv.stdin.kind == "literal":
        yield "input", lit(inv.stdin.text)
    if "@operands" in spec.names:
        operands = _operands_after(spec, args)
        if operands:
            yield "command", _joined(operands)


def _option_value(name: str, t: str, args: Sequence[Field], index: int, f: Field) -> Field | None:
    if name.startswith("@"):
        return f if name == "@any" else None
    if name == "+":
        return tail(f, 1) if t.startswith("+") and len(t) > 1 else None
    if name.endswith("="):  # an operand NAME=VALUE
        return tail(f, len(name)) if t.startswith(name) else None
    if t == name:
        return args[index + 1] if index + 1 < len(args) else None
    if t.startswith(name + "="):
        return tail(f, len(name) + 1)
    if len(name) == 2 and t.startswith(name) and not t.startswith("--") and len(t) > 2:
        return tail(f, 2)  # -oProxyCommand=...: the value glued to a short option
    return None


def tail(f: Field, start: int) -> Field:
    """``f`` without its first ``start`` characters (which are literal option text)."""
    segs: list[tuple[str, bool]] = []
    skip = start
    for text, dynamic in f.segs:
        if skip >= len(text) and not dynamic:
            skip -= len(text)
            continue
        segs.append((text[skip:] if not dynamic else text, dynamic))
        skip = 0
    return Field(tuple(segs) or (("", False),), f.glob, f.taint, f.content)


def _operands_after(spec: knowledge.CommandArg, args: Sequence[Field]) -> list[Field]:
    operands: list[Field] = []
    started = False
    skip = False
    for f in args:
        t = f.text
        if skip:
            skip = False
        elif not started:
            started = t in spec.keys
        elif t.startswith("-") and not operands:
            skip = t in spec.opts_with_arg
        else:
            operands.append(f)
    return operands


def _joined(fields: Sequence[Field]) -> Field:
    segs: list[tuple[str, bool]] = []
    for index, f in enumerate(fields):
        if index:
            segs.append((" ", False))
        segs.extend(f.segs)
    return Field(tuple(segs))


# --- how a command sits in a value -------------------------------------------------------
# Hand-written patterns, not parsers: of a sed script, a makefile, a Tcl or Lisp snippet only
# the few constructs that run a command matter, and no library parses all of these languages.

Form = Callable[[str, knowledge.CommandArg, Invocation], list[str]]


def _shell(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    return [text]


def _keyed(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    """``KEY=CMD`` or ``KEY CMD`` (ssh -o, apt -o, tar --checkpoint-action=exec=CMD)."""
    m = re.match(r"\s*([^=\s]+)\s*(?:=|\s)\s*(.*)$", text, re.S)
    if m and any(fnmatch.fnmatchcase(m.group(1).lower(), k) for k in spec.keys):
        return [m.group(2)]
    return []


def _gitconfig(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    key, eq, value = text.partition("=")
    if eq and knowledge.git_code_key(key, value):
        return [value.lstrip().removeprefix("!")]
    return []


def _gitconfig_env(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    """``--config-env=KEY=ENVVAR``: a command key's value is in a variable not known here."""
    key, eq, _ = text.partition("=")
    if eq and knowledge.git_code_key(key, "!"):
        inv.runs_code = Content("unknown", source=f"git --config-env {text}")
    return []


def _ext_url(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    """git's ``ext::CMD`` remote: CMD's words split at spaces, ``% `` a literal space."""
    if not text.startswith("ext::"):
        return []
    words = [w.replace("\0", " ") for w in text[5:].replace("% ", "\0").split(" ") if w]
    return [shlex.join(words)]


def _crontab(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    """Crontab lines: five time fields (or ``@reboot`` and the like), then the command."""
    commands = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or re.match(r"^[A-Za-z_]\w*\s*=", line):
            continue
        parts = line.split(None, 1 if line.startswith("@") else 5)
        if len(parts) == (2 if line.startswith("@") else 6):
            commands.append(parts[-1])
    return commands


def _script(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    """``at -f FILE``: the commands are in a file, not known here."""
    inv.runs_code = Content("file", text, source=f"{inv.program} -f")
    return []


def _bang(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    """An editor, pager or debugger command: ``!CMD``, ``:!CMD``, ``silent !CMD``,
    ``shell CMD``, ``r !CMD``, ``call system("CMD")``."""
    called = [m.group(2) for m in regex(_SYSTEM_CALL).finditer(text)]
    if called:
        return called
    s = text.strip().lstrip(":").strip()
    s = re.sub(r"^(r|read|w|write)\s*(?=!)", "", s)
    s = re.sub(r"^(silent!?|exe(cute)?)\s*", "", s).strip("\"'")
    if s.startswith("!"):
        return [s[1:]]
    if s.startswith("shell "):
        return [s[6:]]
    return []


def _bang_lines(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    return [cmd for line in text.splitlines() for cmd in _bang(line, spec, inv)]


def _sed(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    """sed's ``e CMD`` command and the ``e`` flag of ``s`` (the result is run)."""
    found = [m.group(1).strip() for m in regex(_SED_E).finditer(text)]
    bare_e = regex(_SED_BARE_E).search(text) is not None  # `e` alone: run the pattern space
    substitutions = list(regex(_SED_S).finditer(text))
    for m in substitutions:
        if "e" in m.group(4) or bare_e:
            found.append(m.group(3).replace("\\n", "\n"))
    if bare_e and not substitutions:  # each line of the input runs as a command
        inv.runs_code = Content("unknown", source="sed e")
    return found


def _lisp(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    return [m.group(1).replace('\\"', '"') for m in regex(_LISP).finditer(text)]


def _expect(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    return [m.group(1).strip() for m in regex(_EXPECT).finditer(text)]


def _make_eval(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    """Makefile text: ``$(shell CMD)``, recipes (tab-indented) and ``target: ; CMD``."""
    shells = [m.group(1) for m in regex(_MAKE_SHELL).finditer(text)]
    recipes = [ln[1:].lstrip("@-+ ") for ln in text.splitlines() if ln.startswith("\t")]
    rules = [m.group(1).lstrip("@-+ ") for m in regex(_MAKE_RULE, re.M).finditer(text)]
    return shells + recipes + rules


def _makefile(text: str, spec: knowledge.CommandArg, inv: Invocation) -> list[str]:
    """``make -f -``: the makefile is what make reads; its recipes are commands."""
    if text not in ("-", "/dev/stdin"):
        return []
    if inv.stdin.kind != "literal":
        inv.runs_code = inv.stdin if inv.stdin.kind != "none" else Content("unknown")
        return []
    return _make_eval(inv.stdin.text, spec, inv)


FORMS: dict[str, Form] = {
    "shell": _shell,
    "crontab": _crontab,
    "script": _script,
    "keyed": _keyed,
    "gitconfig": _gitconfig,
    "gitconfig-env": _gitconfig_env,
    "ext-url": _ext_url,
    "bang": _bang,
    "bang-lines": _bang_lines,
    "sed": _sed,
    "lisp": _lisp,
    "expect": _expect,
    "make-eval": _make_eval,
    "makefile": _makefile,
}
