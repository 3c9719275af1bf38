"""gitignore patterns → regular expressions, with gitignore's semantics (as the pathspec
library implements them; a test holds the two to the same answers). Written here because
importing pathspec costs tens of milliseconds that ``agentvisor exec`` cannot spend.

A pattern with a slash before its end is anchored to the root it is matched from; one
without matches at any depth. ``*`` and ``?`` stay within one path part, ``**`` spans
parts, a trailing ``/`` matches only a directory (and what is in it), and a match on a
directory covers everything below it. ``!`` in front exempts.
"""

from __future__ import annotations

import re


def pattern_regex(pattern: str) -> tuple[str, bool]:
    """(regex source to ``re.match`` against a root-relative path, include?)."""
    include = True
    if pattern.startswith("!"):
        include = False
        pattern = pattern[1:]
    elif pattern.startswith("\\!") or pattern.startswith("\\#"):
        pattern = pattern[1:]
    pattern = re.sub(r"(?<!\\) +$", "", pattern)
    directory = pattern.endswith("/")
    pattern = pattern.rstrip("/")
    anchored = "/" in pattern
    pattern = pattern.lstrip("/")
    parts = pattern.split("/")
    out = ["^"]
    if not anchored or parts[0] == "**":
        out.append("(?:.+/)?")
        if parts[0] == "**":
            parts = parts[1:]
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            out.append(".*" if last else "(?:.+/)?")
            continue
        out.append(_part(part))
        if not last:
            out.append("/")
    if parts and parts[-1] == "**":
        return "".join(out), include
    out.append("/" if directory else "(?:/|$)")
    return "".join(out), include


def _part(part: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(part):
        c = part[i]
        if c == "\\" and i + 1 < len(part):
            out.append(re.escape(part[i + 1]))
            i += 2
        elif c == "*":
            while i + 1 < len(part) and part[i + 1] == "*":
                i += 1
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            end = part.find("]", i + 2)
            if end < 0:
                out.append(re.escape(c))
                i += 1
                continue
            body = part[i + 1 : end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return "".join(out)


class PathSet:
    """Many gitignore patterns matched at once, rooted at ``/``.

    ``~/`` in a pattern is the home directory; a pattern without a leading ``/`` or
    ``~/`` is matched relative to ``base`` (a directory), or at any depth anywhere when
    ``base`` is None. Gitignore's last-match-wins is kept for ``!`` exemptions by
    checking exemptions only against paths that matched an inclusion.
    """

    def __init__(
        self, patterns: list[str] | tuple[str, ...], home: str, base: str | None = None
    ) -> None:
        self._patterns = tuple(patterns)
        self._home = home
        self._base = base
        self._include: re.Pattern[str] | None = None
        self._exclude: re.Pattern[str] | None = None
        self._compiled = False

    def _compile(self) -> None:
        # On first use, not in __init__: compiling the built-in sets costs milliseconds that
        # most commands (`agentvisor exec -- true`) never need.
        include: list[str] = []
        exclude: list[str] = []
        for p in self._patterns:
            negated = p.startswith("!")
            body = absolute_pattern(p[1:] if negated else p, self._home, self._base)
            regex, _ = pattern_regex(body)
            (exclude if negated else include).append(f"(?:{regex})")
        self._include = re.compile("|".join(include)) if include else None
        self._exclude = re.compile("|".join(exclude)) if exclude else None
        self._compiled = True

    def match(self, path: str) -> bool:
        if not self._compiled:
            self._compile()
        if self._include is None or path == "/":
            return False
        rel = path.lstrip("/")
        candidates = (rel, rel + "/")
        if not any(self._include.match(c) for c in candidates):
            return False
        return not (self._exclude and self._exclude.match(rel))


def absolute_pattern(pattern: str, home: str, base: str | None) -> str:
    """Rewrite a pattern so it matches root-relative paths."""
    if pattern == "~" or pattern.startswith("~/"):
        return "/" + (home.strip("/") + pattern[1:]).lstrip("/")
    if pattern.startswith("/"):
        return pattern
    if base is None:
        return pattern if "/" not in pattern.rstrip("/") else "**/" + pattern
    prefix = "/" + base.strip("/")
    if pattern.startswith("./"):  # anchored at the base, as a leading / is in .gitignore
        return prefix.rstrip("/") + "/" + pattern[2:]
    if "/" not in pattern.rstrip("/"):
        return prefix.rstrip("/") + "/**/" + pattern
    return prefix.rstrip("/") + "/" + pattern
