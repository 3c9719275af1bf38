"""Default flow labels for an upstream tool that the config does not label.

A third-party server ships no labels, so they are guessed from the tool's name, failing
towards more caution: a read of someone's service is both private (it is the user's
data) and untrusted (anyone can write into a mailbox, a calendar, a channel, a page); a
verb that reaches other people is an external write; a tool whose name says nothing is
treated as reading untrusted content AND writing outside.
"""

from __future__ import annotations

import re

READ_VERBS = frozenset(
    [
        "get",
        "list",
        "read",
        "search",
        "find",
        "fetch",
        "query",
        "show",
        "view",
        "lookup",
        "check",
        "describe",
        "count",
        "download",
        "browse",
        "load",
        "open",
        "retrieve",
    ]
)
# Verbs whose effect reaches other people or the outside world.
EXTERNAL_VERBS = frozenset(
    [
        "send",
        "post",
        "email",
        "mail",
        "message",
        "reply",
        "forward",
        "share",
        "invite",
        "publish",
        "upload",
        "transfer",
        "pay",
        "tweet",
        "comment",
        "notify",
        "submit",
        "reserve",
        "book",
        "schedule",
        "call",
        "dm",
    ]
)
# Verbs that change the user's own data in place.
INTERNAL_VERBS = frozenset(
    [
        "write",
        "edit",
        "create",
        "update",
        "delete",
        "remove",
        "move",
        "rename",
        "add",
        "append",
        "set",
        "cancel",
        "reschedule",
        "mkdir",
        "copy",
        "insert",
        "modify",
    ]
)


def default_labels(tool: str) -> tuple[str, ...]:
    words = [w for w in re.split(r"[^a-z0-9]+", _snake(tool)) if w]
    if any(w in EXTERNAL_VERBS for w in words):
        return ("external_write",)
    if words and words[0] in INTERNAL_VERBS:
        return ("internal_write",)
    if words and words[0] in READ_VERBS:
        return ("private_read", "untrusted_read")
    return ("untrusted_read", "external_write")


def _snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()
