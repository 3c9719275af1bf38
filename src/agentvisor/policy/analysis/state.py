"""The analyser's limits and the shell state it tracks while walking a program."""

from __future__ import annotations

from ...records import Declared, Default
from .. import ir
from ..facts import NO_INPUT, Content, Field, Redir, lit

MAX_DEPTH = 10  # nested shells, eval, aliases and function calls
MAX_INVOCATIONS = 2000
MAX_LOOP_VALUES = 16
MAX_SOURCE = 256 * 1024  # longer command lines are not analysed (and so not allowed)
PLACEHOLDER = "__agentvisor_unknown__"


class Func(Declared, frozen=False):
    body: ir.Stmt
    forks: bool
    called: bool = False


class Env(Declared, frozen=False):
    """Variables, functions, aliases, directory and streams at one point of the program.
    ``files`` (path → taint: what a downloader wrote there) is shared by every copy."""

    vars: dict[str, Field]
    funcs: dict[str, Func]
    aliases: dict[str, str]
    cwd: str | None
    positional: tuple[Field, ...]
    stdin: Content = NO_INPUT
    out_redirects: tuple[Redir, ...] = ()
    files: dict[str, frozenset[str]] = Default(factory=dict)
    written: dict[str, Content] = Default(factory=dict)  # path → what this line wrote there
    arg0: Field = lit("sh")

    def copy(self) -> Env:
        return Env(
            dict(self.vars),
            dict(self.funcs),
            dict(self.aliases),
            self.cwd,
            self.positional,
            self.stdin,
            self.out_redirects,
            self.files,
            self.written,
            self.arg0,
        )


def new_env(workspace: str, home: str) -> Env:
    env_vars = {
        "HOME": lit(home),
        "PWD": lit(workspace),
        "IFS": lit(" \t\n"),
        # Whatever their exact value, these name a shell: `$SHELL -c CMD` runs CMD.
        "SHELL": lit("/bin/sh"),
        "BASH": lit("/bin/bash"),
    }
    return Env(env_vars, {}, {}, workspace, (), NO_INPUT)
