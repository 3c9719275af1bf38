"""What the stores do to text before it is written: redact it, and bound what is large.

Every text that reaches the state database (audit events, including decision reasons,
approval and network events and errors; the approvals table, which the dashboard and the
webhook show to people) passes `Redact`, the gateway's one redaction function (the secret
values and their encodings, `agentvisor.net.secrets.Redactor.text`). The stores take it
as a parameter because the state layer cannot import the network layer above it.

Large arguments (a 1 MiB ``write_file``) are stored as a bounded head plus their size and
SHA-256, so one call cannot grow the log by megabytes while the log still identifies what
was written (the hash is of the redacted text: the file's own hash when it held no secret).
"""

from __future__ import annotations

import hashlib

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, TypeAlias

    Redact: TypeAlias = Callable[[str], str]

HEAD_CHARS = 4096  # of one argument's text kept in the audit log


def unchanged(text: str) -> str:
    """The redaction when no secret is configured."""
    return text


def redacted(value: str | None, redact: Redact) -> str | None:
    return None if value is None else redact(value)


def bounded(value: Any, redact: Redact) -> Any:
    """``value`` (an event's arguments) with every text redacted and every text longer
    than `HEAD_CHARS` cut to its head plus its size and SHA-256."""
    if isinstance(value, str):
        text = redact(value)
        if len(text) <= HEAD_CHARS:
            return text
        data = text.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(data).hexdigest()
        return f"{text[:HEAD_CHARS]}… [cut: {len(data)} bytes in all, sha256 {digest}]"
    if isinstance(value, dict):
        return {redact(str(k)): bounded(v, redact) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [bounded(item, redact) for item in value]
    return value
