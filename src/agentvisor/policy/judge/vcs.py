"""Checks on version control: history rewritten or work discarded, and git config
that makes git run a command later."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator

from .. import knowledge
from ..facts import Invocation
from .findings import Finding
from .scope import Scope


def git(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    args = [a.text for a in inv.argv[1:]]
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in knowledge.GIT_GLOBAL_OPTS_WITH_ARG else 1
    if i >= len(args):
        return
    sub, rest = args[i], args[i + 1 :]
    reason = _destructive(sub, rest)
    if reason:
        yield Finding("vcs_destructive", "ask", f"`{piece}` {reason}", piece)
    for key, value in _config_sets(sub, rest):
        if _code_key(key, value):
            reason = (
                f"`{piece}` sets git's {key}, a command git runs later (also outside the sandbox)"
            )
            yield Finding("persistence", "ask", reason, piece)


def _destructive(sub: str, rest: list[str]) -> str:
    flags = set(rest)
    short = "".join(t[1:] for t in rest if re.fullmatch(r"-[a-zA-Z]+", t))
    if sub == "push":
        if (
            {"--force", "--mirror"} & flags
            or "f" in short
            or any(t.startswith(("--force-with-lease", "--force-if-includes")) for t in rest)
        ):
            return "force-pushes, which can overwrite history on the remote"
        if {"--delete", "--prune"} & flags or "d" in short:
            return "deletes branches or tags on the remote"
        ops = [t for t in rest if not t.startswith("-")]
        if any(t.startswith("+") for t in ops[1:]):
            return "force-pushes a +ref, which can overwrite history on the remote"
        if any(t.startswith(":") and len(t) > 1 for t in ops[1:]):
            return "deletes a branch on the remote (:ref)"
    elif sub == "reset" and "--hard" in flags:
        return "discards uncommitted work (reset --hard)"
    elif (
        sub == "clean"
        and ("f" in short or "--force" in flags)
        and not ("n" in short or "--dry-run" in flags)
    ):
        return "deletes untracked files (clean -f)"
    elif sub == "branch" and (
        "D" in short
        or (("d" in short or "--delete" in flags) and ("f" in short or "--force" in flags))
    ):
        return "force-deletes a branch (branch -D)"
    elif sub in ("filter-branch", "filter-repo"):
        return "rewrites history"
    elif sub == "reflog" and rest and rest[0] in ("expire", "delete"):
        return "drops reflog entries that recover lost commits"
    elif sub == "update-ref" and "-d" in flags:
        return "deletes a ref"
    elif sub == "checkout" and (
        "f" in short or "--force" in flags or any(t in (".", ":/", "*", "./") for t in rest)
    ):
        return "discards uncommitted changes (checkout)"
    elif sub == "restore":
        staged_only = ("S" in short or "--staged" in flags) and not (
            "W" in short or "--worktree" in flags
        )
        if not staged_only and any(t in (".", ":/", "*", "./") for t in rest):
            return "discards uncommitted changes in the whole tree (restore)"
    return ""


def _config_sets(sub: str, rest: list[str]) -> Iterator[tuple[str, str]]:
    if sub == "config":
        ops = []
        i = 0
        while i < len(rest):
            t = rest[i]
            if t in ("-f", "--file", "--blob", "--type"):
                i += 2
                continue
            if not t.startswith("-"):
                ops.append(t)
            i += 1
        if ops and ops[0] in ("set", "unset", "get", "list", "edit"):
            if ops[0] != "set":
                return
            ops = ops[1:]
        if len(ops) >= 2:
            yield ops[0], ops[1]
    elif sub in ("clone", "submodule", "init"):
        for index, t in enumerate(rest):
            value = None
            if t in ("-c", "--config") and index + 1 < len(rest):
                value = rest[index + 1]
            elif t.startswith("--config="):
                value = t.split("=", 1)[1]
            if value and "=" in value:
                key, _, v = value.partition("=")
                yield key, v
            if sub == "clone" and (t.startswith("--template") or t in ("-u", "--upload-pack")):
                yield "init.templatedir", "x"


def _code_key(key: str, value: str) -> bool:
    parts = key.split(".")
    if len(parts) < 2:
        return False
    lowered = ".".join([parts[0].lower(), *parts[1:-1], parts[-1].lower()])
    for pattern in knowledge.GIT_CODE_KEYS:
        p_parts = pattern.split(".")
        if len(p_parts) != len(lowered.split(".")) and not (
            len(p_parts) == 2 and p_parts[1] == "*"
        ):
            continue
        if fnmatch.fnmatchcase(lowered.lower(), pattern):
            return not pattern.startswith("alias.") or value.lstrip().startswith("!")
    return False
