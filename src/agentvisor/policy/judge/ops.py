"""Checks on tools that act outside the sandbox: container engines, Kubernetes, Helm,
cloud CLIs, Terraform and database clients reach what they destroy through a socket, an
API or the network, where no sandbox or changeset can undo it (`knowledge.OPS`)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator

from .. import knowledge
from ..facts import Invocation
from ..lazyre import regex
from .findings import Finding, short
from .scope import Scope

_OUTSIDE = "it acts outside the sandbox, where nothing undoes it"


def destroys(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    program = inv.program or ""
    words = _verb_words([a.text for a in inv.argv[1:]])
    for spec in knowledge.OPS.get(program, ()):
        verbs = spec.verbs[1:] if spec.verbs[:1] == ("...",) else spec.verbs
        starts = range(4) if verbs is not spec.verbs else range(1)
        n = len(verbs)
        for start in starts:
            head = words[start : start + n]
            if len(head) == n and all(map(fnmatch.fnmatchcase, head, verbs)):
                yield _finding(piece, spec.what, words[start + n :])
                return
    flags = {a.text for a in inv.argv[1:]}
    for verb, flag, what in knowledge.OPS_DESTROY_FLAGS.get(program, ()):
        if words[:1] == [verb] and flag in flags:
            yield _finding(piece, what, words[1:])
            return


def host_containers(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    """``docker run -v /:/host``, ``--privileged``: a container that can change the host."""
    words = _verb_words([a.text for a in inv.argv[1:]])
    if not (set(words[:2]) & knowledge.CONTAINER_RUN_VERBS):
        return
    args = [a.text for a in inv.argv[1:]]
    for index, t in enumerate(args):
        key, eq, value = t.partition("=")
        if key in ("-v", "--volume", "--mount") and not eq and index + 1 < len(args):
            value = args[index + 1]
        elif not (key in ("-v", "--volume", "--mount") and eq):
            value = ""
        source = value.split("source=", 1)[-1] if "source=" in value else value
        if t in knowledge.CONTAINER_HOST_FLAGS or (
            source and regex(knowledge.CONTAINER_HOST_VOLUMES).search(source)
        ):
            shown = short(value or t, 40)
            what = f"starts a container that can change the host ({shown})"
            yield Finding("ops_destructive", "ask", f"`{piece}` {what}; {_OUTSIDE}", piece)
            return


def queries(scope: Scope, inv: Invocation, piece: str) -> Iterator[Finding]:
    opts = knowledge.QUERY_OPTS.get(inv.program or "", frozenset())
    texts = _query_texts(inv, opts)
    for text in texts:
        match = regex(knowledge.DESTRUCTIVE_QUERY, re.I).search(text)
        if match:
            what = f"runs `{short(match.group(0), 40)}` on a database"
            yield Finding("ops_destructive", "ask", f"`{piece}` {what}; {_OUTSIDE}", piece)
            return


def _query_texts(inv: Invocation, opts: frozenset[str]) -> list[str]:
    args = inv.argv[1:]
    texts = []
    for index, a in enumerate(args):
        key, eq, value = a.text.partition("=")
        if key in opts:
            texts.append(value if eq else (args[index + 1].text if index + 1 < len(args) else ""))
    if not opts:  # redis-cli: the command is the operands
        texts.append(" ".join(a.text for a in args if not a.text.startswith("-")))
    if inv.stdin.kind == "literal":
        texts.append(inv.stdin.text)
    return texts


def _verb_words(args: list[str]) -> list[str]:
    """The operand words of a command line, options and their values left out."""
    words: list[str] = []
    skip = False
    for t in args:
        if skip:
            skip = False
        elif t.startswith("-"):
            skip = "=" not in t and t in knowledge.OPS_OPTS_WITH_ARG
        else:
            words.append(t)
    return words


def _finding(piece: str, what: str, targets: list[str]) -> Finding:
    named = f" ({short(' '.join(targets), 60)})" if targets else ""
    return Finding("ops_destructive", "ask", f"`{piece}` {what}{named}; {_OUTSIDE}", piece)
