"""Checks for what cannot be undone: recursive deletes of system and home directories,
filesystem and device wipes, recursive permission changes of system directories."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from .. import knowledge
from ..facts import Field, Invocation, resolve_path
from .findings import Finding, is_remote, operands, option_value
from .scope import Scope


def delete(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    recursive, targets = _delete_targets(inv)
    if not recursive:
        return
    for t in targets:
        yield from _delete_target(scope, t, inv, piece)


def _delete_target(scope: Scope, t: Field, inv: Invocation, piece: str) -> Iterator[Finding]:
    if t.lead_dynamic:
        reason = f"`{piece}` deletes recursively a path that is only known when it runs ({t.text})"
        yield Finding("delete_system", "ask", reason, piece)
        return
    path = resolve_path(t.probe("*") if t.dynamic else t.text, inv.cwd, scope.home)
    if path is None:
        reason = f"`{piece}` deletes recursively in a directory that is only known when it runs"
        yield Finding("delete_system", "ask", reason, piece)
        return
    what = scope.protected_dir(path, glob=t.glob or t.dynamic)
    if what:
        yield Finding("delete_system", "deny", f"`{piece}` deletes {what} recursively", piece)


def _delete_targets(inv: Invocation) -> tuple[bool, list[Field]]:
    program = inv.program
    args = inv.argv[1:]
    texts = [a.text for a in args]
    if program == "rm":
        recursive = any(
            t in ("--recursive",) or re.fullmatch(r"-[a-zA-Z]*[rR][a-zA-Z]*", t)
            for t in texts
            if t != "--"
        )
        return recursive, operands(args)
    if program == "find" and "-delete" in texts:
        starts = []
        for a in args:
            if a.text.startswith(("-", "(", "!")) and not a.dynamic:
                break
            starts.append(a)
        return True, starts or [Field(((".", False),))]
    if program == "mv":
        ops = operands(args)
        if option_value(args, ("-t", "--target-directory")) is not None:
            return True, [o for o in ops if o is not option_value(args, ("-t",))]
        return True, ops[:-1]
    if program == "rsync" and any(t.startswith("--delete") for t in texts):
        ops = operands(args)
        return True, ops[-1:] if ops and not is_remote(ops[-1].text) else []
    return False, []


def disk(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    program = inv.program or ""
    base = "mkfs" if program.startswith("mkfs") else program
    args = [a.text for a in inv.argv[1:]]
    when = knowledge.DISK_WRITE_WHEN.get(base)
    if when is not None:
        if any(a in knowledge.DISK_READ_ONLY_OPTS for a in args):
            return
        if "*" not in when and not any(a.split("=")[0] in when for a in args):
            return
    for f in operands(inv.argv[1:]):
        if f.lead_dynamic:
            reason = f"`{piece}` works on a device that is only known when it runs"
            yield Finding("disk_format", "ask", reason, piece)
        elif knowledge.is_block_device(posixpath.normpath(f.text)):
            verb = "overwrites" if program == "shred" else "formats, wipes or repartitions"
            reason = f"`{piece}` {verb} the block device {f.text}"
            yield Finding("disk_format", "deny", reason, piece)


def chmod(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    args = inv.argv[1:]
    texts = [a.text for a in args]
    recursive = any(
        t in ("-R", "--recursive") or re.fullmatch(r"-[a-zA-Z]*R[a-zA-Z]*", t) for t in texts
    )
    ops = operands(args)
    if inv.program == "chmod" and ops:
        mode = ops[0].text
        if re.search(r"[ugoa]*[+=][rwxXt]*s", mode) or re.fullmatch(r"[2467][0-7]{3}", mode):
            yield Finding("persistence", "ask", f"`{piece}` sets a setuid/setgid bit", piece)
    if not recursive:
        return
    has_reference = any(t.startswith("--reference") for t in texts)
    for f in ops[0 if has_reference else 1 :]:
        path = None if f.lead_dynamic else resolve_path(f.text, inv.cwd, scope.home)
        if path is None:
            continue
        what = scope.protected_dir(path, glob=f.glob)
        if what and not what.startswith("the home"):
            reason = f"`{piece}` changes permissions or owner of {what} recursively"
            yield Finding("chmod_system", "deny", reason, piece)
