"""`Finding`, what every check yields, and the small readers of arguments checks share."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ...records import Declared
from ..categories import HARDLINE
from ..facts import Content, Field


class Finding(Declared):
    """One reason an action falls in a category. ``verdict`` may be ``ask`` for a
    hardline category when the analysis can only say it *might* be one."""

    category: str
    verdict: str
    reason: str
    piece: str = ""
    tag: str = ""

    @property
    def hardline(self) -> bool:
        return self.verdict == "deny" and self.category in HARDLINE


def short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def from_(content: Content) -> str:
    """`` (from `SOURCE`)``: where a stream or code came from, for a reason."""
    return f" (from `{short(content.source, 60)}`)" if content.source else ""


def dedupe(findings: Iterable[Finding]) -> list[Finding]:
    seen: set[tuple[str, str]] = set()
    out = []
    for f in findings:
        key = (f.category, f.reason)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def operands(args: Iterable[Field]) -> list[Field]:
    out: list[Field] = []
    dashdash = False
    for a in args:
        if dashdash or a.dynamic or not a.text.startswith("-") or a.text == "-":
            out.append(a)
        elif a.text == "--":
            dashdash = True
    return out


def option_value(args: tuple[Field, ...], names: tuple[str, ...]) -> Field | None:
    for index, a in enumerate(args):
        key, eq, value = a.text.partition("=")
        if key in names:
            if eq:
                return Field(((value, a.dynamic),))
            if index + 1 < len(args):
                return args[index + 1]
    return None


def is_remote(text: str) -> bool:
    return bool(
        re.match(r"^(rsync://|[a-z0-9+.-]+:(?!/)|([^/@:\s]+@)?[A-Za-z0-9_.-]+:)", text)
    ) and not text.startswith("/")
