"""Shell program → the simple commands it would run (`facts.Invocation`), seeing through
quoting, expansion, wrappers, nested shells, eval, functions, aliases, substitutions,
pipes into shells and inline interpreter code.

It judges nothing: it only works out, as far as can be known without running anything,
which programs run with which arguments, what they read on stdin, where their output
goes and in which directory. What cannot be known is marked dynamic, never guessed.

- `walk`: statements and the lookup of each simple command;
- `expand`: word expansion into fields;
- `builtins`, `runners`: what builtins, wrappers, shells and interpreters run (the
  programs themselves are described as data in `knowledge`);
- `outputs`: what a command writes, where an interpreter's code is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..facts import Analysis, lit
from ..limits import Budget, TooComplex
from .state import MAX_SOURCE, new_env
from .walk import Analyzer

__all__ = ["analyze_argv", "analyze_source"]


def analyze_source(source: str, workspace: str, home: str) -> Analysis:
    a = Analyzer(home, Budget())
    if len(source) > MAX_SOURCE:
        a.note("too_many", f"the command line is longer than {MAX_SOURCE} characters")
        return Analysis([], a.notes)
    if "\0" in source:  # a shell never sees past it; what the tool does with it is unknown
        a.note("unparsed", "the command line contains a NUL byte")
        return Analysis([], a.notes)
    env = new_env(workspace, home)

    def walk() -> None:
        a.run_source(source, env, 0, ())
        a.finish(env)

    return _within_budget(a, walk)


def analyze_argv(argv: Sequence[str], workspace: str, home: str) -> Analysis:
    """An argv run without a shell: no expansion, but wrappers, shells and
    interpreters in it are still looked through."""
    a = Analyzer(home, Budget())
    env = new_env(workspace, home)

    def walk() -> None:
        a.dispatch(tuple(lit(x) for x in argv), (), env.stdin, env, 0, ())

    return _within_budget(a, walk)


def _within_budget(a: Analyzer, walk: Callable[[], None]) -> Analysis:
    """Run ``walk``; over the budget, what was found so far plus a ``too_complex`` note
    (judged as an ask: an analysis that gave up must not allow anything)."""
    try:
        walk()
    except TooComplex as exc:
        a.note("too_complex", str(exc))
    except RecursionError:  # a path the nesting budget does not count yet: fail closed
        a.note("too_complex", "it is nested too deep to follow")
    return Analysis(a.invocations, a.notes)
