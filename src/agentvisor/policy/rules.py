"""The rule language: patterns per kind, context conditions, expiry; compiled once.

    exec    tokens matched against each simple command the analysis found. Exact by
            default; a last token ``*`` accepts any further arguments (prefix form); a
            token with ``*``, ``?`` or ``[...]`` is a glob within that argument. The first
            token without a ``/`` matches the program's name (``rm`` matches /bin/rm).
    read,   gitignore patterns: relative ones against the workspace, ``~/...`` against
    write   the home directory, ``/...`` against the filesystem root.
    fetch   ``host``, ``*.domain`` (subdomains only, not the domain itself), ``*`` (any
            host), each with an optional ``:port``.
    secret  ``NAME`` or ``NAME@HOST-PATTERN`` (NAME may be a glob).
    tool    a glob on the tool's name.

The same compiled form serves config rules and operator grants.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
import shlex
import time
from collections.abc import Callable, Iterable, Sequence

from ..actions import KINDS, Context
from ..errors import ConfigError
from ..records import Declared
from .globs import absolute_pattern, pattern_regex
from .lazyre import regex

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    import datetime as dt
    from typing import Any

    from .facts import Invocation

_GLOB = re.compile(r"[*?\[]")
_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_TIME_RE = r"^([01]\d|2[0-3]):([0-5]\d)-([01]\d|2[0-4]):([0-5]\d)$"


# --- matchers ---------------------------------------------------------------------------


class _Token:
    __slots__ = ("regex", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.regex = re.compile(fnmatch.translate(text)) if _GLOB.search(text) else None

    def match(self, value: str) -> bool:
        return self.regex.match(value) is not None if self.regex else value == self.text


class ExecPattern:
    def __init__(self, pattern: str) -> None:
        try:
            tokens = shlex.split(pattern)
        except ValueError as exc:
            raise ValueError(f"exec pattern {pattern!r}: {exc}") from None
        if not tokens:
            raise ValueError("exec pattern is empty")
        self.prefix = tokens[-1] == "*"
        if self.prefix:
            tokens = tokens[:-1]
        self.tokens = [_Token(t) for t in tokens]
        self.by_path = bool(tokens) and "/" in tokens[0]
        head = tokens[0] if tokens else ""
        # Index key: the program name, when the first token is a plain name.
        self.program = None if (not head or _GLOB.search(head) or self.by_path) else head

    def match(self, inv: Invocation, allowing: bool) -> bool:
        """Does the simple command match? An allow never matches text that is only known
        when the command runs; deny and ask match on what is written."""
        argv = inv.argv
        if not self.tokens:
            return not (allowing and inv.program is None)
        if len(argv) < len(self.tokens) or (not self.prefix and len(argv) != len(self.tokens)):
            return False
        if inv.program is None and allowing:
            return False
        for index, token in enumerate(self.tokens):
            f = argv[index]
            if allowing and f.dynamic:
                return False
            value = f.text
            if index == 0:
                value = posixpath.normpath(value) if self.by_path else (inv.program or value)
            if not token.match(value):
                return False
        return True


class PathPattern:
    def __init__(self, pattern: str, home: str) -> None:
        if not pattern.strip() or pattern.startswith("!"):
            raise ValueError(
                f"path pattern {pattern!r}: empty or negated patterns are not "
                "rules (write a separate allow rule instead)"
            )
        self.pattern = pattern
        self.home = home
        self.relative = not (pattern.startswith(("/", "~/")) or pattern == "~")
        self._cache: dict[str | None, re.Pattern[str]] = {}
        self.regex(None)  # validate now

    def regex(self, workspace: str | None) -> re.Pattern[str]:
        key = workspace if self.relative else None
        compiled = self._cache.get(key)
        if compiled is None:
            body = absolute_pattern(self.pattern, self.home, key or "/")
            compiled = re.compile(pattern_regex(body)[0])
            self._cache[key] = compiled
        return compiled

    def match(self, path: str, workspace: str) -> bool:
        rel = path.lstrip("/")
        regex = self.regex(workspace)
        return bool(regex.match(rel) or regex.match(rel + "/"))


class HostPattern:
    def __init__(self, pattern: str) -> None:
        text = pattern.strip().lower()
        port: int | None = None
        m = re.match(r"^(\[[0-9a-f:.]+\]|[^:\[\]]+)(?::(\d+))?$", text)
        if not m or "/" in text:
            raise ValueError(
                f"host pattern {pattern!r}: write host, *.domain or * with an "
                "optional :port (no scheme, no path)"
            )
        host = m.group(1)
        if m.group(2):
            port = int(m.group(2))
            if not 0 < port < 65536:
                raise ValueError(f"host pattern {pattern!r}: port out of range")
        from .hosts import normalize_host

        self.any = host == "*"
        self.suffix = host[1:] if host.startswith("*.") else None
        if not self.any and self.suffix is None and "*" in host:
            raise ValueError(f"host pattern {pattern!r}: * may only stand alone or as *.domain")
        self.host = normalize_host(host) if not self.any and self.suffix is None else ""
        if self.suffix is not None:
            self.suffix = "." + normalize_host(self.suffix.lstrip("."))
        self.port = port

    @property
    def exact(self) -> bool:
        return not self.any and self.suffix is None

    def match(self, host: str, port: int | None) -> bool:
        if self.port is not None and port != self.port:
            return False
        if self.any:
            return True
        if self.suffix is not None:
            return host.endswith(self.suffix) and len(host) > len(self.suffix)
        return host == self.host


class SecretPattern:
    def __init__(self, pattern: str) -> None:
        name, at, host = pattern.partition("@")
        if not name:
            raise ValueError(f"secret pattern {pattern!r}: NAME or NAME@HOST")
        self.name = _Token(name)
        self.host = HostPattern(host) if at else None

    def match(self, name: str, host: str | None, port: int | None) -> bool:
        if not self.name.match(name):
            return False
        if self.host is None:
            return True
        return host is not None and self.host.match(host, port)


class ToolPattern:
    def __init__(self, pattern: str) -> None:
        if not pattern.strip():
            raise ValueError("tool pattern is empty")
        self.name = _Token(pattern.strip())

    def match(self, name: str) -> bool:
        return self.name.match(name)


def arguments_match(globs: tuple[tuple[str, str], ...], arguments: Any) -> bool:
    """Every named argument matches its glob (any item of a list may); a missing one never
    does, so a deny rule on ``recipients: "*@evil.com"`` cannot be dodged by a list."""
    from fnmatch import fnmatchcase

    values = arguments if isinstance(arguments, dict) else {}
    for name, glob in globs:
        value = values.get(name)
        items = value if isinstance(value, list) else [value]
        if not any(
            item is not None and fnmatchcase(str(item).lower(), glob.lower()) for item in items
        ):
            return False
    return True


# --- conditions -------------------------------------------------------------------------


class Condition(Declared):
    session: tuple[str, ...] = ()
    agent: tuple[str, ...] = ()
    toolset: tuple[str, ...] = ()
    tool: tuple[str, ...] = ()
    window: tuple[int, int] | None = None  # minutes since midnight, start and end
    days: frozenset[int] = frozenset()

    def match(self, context: Context, now: float) -> bool:
        for globs, value in (
            (self.session, context.session),
            (self.agent, context.agent),
            (self.toolset, context.toolset),
            (self.tool, context.tool),
        ):
            if globs and (value is None or not any(fnmatch.fnmatchcase(value, g) for g in globs)):
                return False
        if self.window is not None or self.days:
            local = time.localtime(now)
            if self.days and local.tm_wday not in self.days:
                return False
            if self.window is not None:
                minute = local.tm_hour * 60 + local.tm_min
                start, end = self.window
                inside = (
                    start <= minute < end if start <= end else (minute >= start or minute < end)
                )
                if not inside:
                    return False
        return True


def _globs(value: str | Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(value)


def compile_condition(when: Any) -> Condition | None:
    if when is None:
        return None
    window = None
    if when.time is not None:
        m = regex(_TIME_RE).match(when.time.replace(" ", ""))
        if not m:
            raise ValueError(f"when.time {when.time!r}: write HH:MM-HH:MM (24-hour, local time)")
        h1, m1, h2, m2 = (int(x) for x in m.groups())
        window = (h1 * 60 + m1, h2 * 60 + m2)
    days = frozenset(_DAYS.index(d) for d in (when.days or ()))
    return Condition(
        _globs(when.session),
        _globs(when.agent),
        _globs(when.toolset),
        _globs(when.tool),
        window,
        days,
    )


def expiry_of(value: dt.datetime | dt.date | str | None) -> float | None:
    """An epoch time; a date means the end of that day, local time."""
    if value is None:
        return None
    import datetime as dt  # here: only rules that expire need it, and it costs 2 ms to import

    if isinstance(value, str):
        text = value
        try:
            value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            try:
                value = dt.date.fromisoformat(text)
            except ValueError:
                raise ValueError(
                    f"expires {text!r}: write a date (2026-12-31) or a time (2026-12-31T18:00:00Z)"
                ) from None
    if isinstance(value, dt.datetime):
        return value.timestamp()
    end = dt.datetime.combine(value, dt.time()) + dt.timedelta(days=1)
    return end.timestamp()


# --- rules ------------------------------------------------------------------------------


class Rule(Declared):
    """A compiled rule or grant. ``name`` is what decisions cite."""

    decision: str
    kind: str
    pattern: str
    name: str
    matcher: Any
    when: Condition | None = None
    methods: frozenset[str] | None = None
    expires: float | None = None
    reason: str | None = None
    # tool rules: (argument name, glob) pairs the call's arguments must all match.
    arguments: tuple[tuple[str, str], ...] = ()

    def active(self, context: Context, now: float) -> bool:
        if self.expires is not None and now >= self.expires:
            return False
        return self.when is None or self.when.match(context, now)


def compile_matcher(kind: str, pattern: str, home: str) -> Any:
    if kind == "exec":
        return ExecPattern(pattern)
    if kind in ("read", "write"):
        return PathPattern(pattern, home)
    if kind == "fetch":
        return HostPattern(pattern)
    if kind == "secret":
        return SecretPattern(pattern)
    if kind == "tool":
        return ToolPattern(pattern)
    raise ValueError(f"unknown kind {kind!r} (accepted: {', '.join(KINDS)})")


def compile_rules(config: Any, home: str) -> list[Rule]:
    """Every rule of ``config.rules``, named ``FILE rules[N]`` or by its id."""
    source = config.source or "<defaults>"
    out: list[Rule] = []
    for index, r in enumerate(config.rules):
        name = r.id or f"{source} rules[{index}]"
        methods = frozenset(m.upper() for m in r.methods) if r.methods else None
        out.append(
            Rule(
                r.decision,
                r.kind,
                r.pattern,
                name,
                compile_matcher(r.kind, r.pattern, home),
                compile_condition(r.when),
                methods,
                expiry_of(r.expires),
                r.reason,
                tuple((r.arguments or {}).items()),
            )
        )
    return out


def check_config(config: Any, source: str) -> None:
    """Config validation: every rule compiles; ids are unique; methods only on fetch."""
    import os

    home = os.path.expanduser("~")
    seen: set[str] = set()
    for index, r in enumerate(config.rules):
        where = f"{source}: rules[{index}]"
        try:
            compile_matcher(r.kind, r.pattern, home)
        except ValueError as exc:
            raise ConfigError(f"{where}.pattern: {exc}") from None
        try:
            compile_condition(r.when)
            expiry_of(r.expires)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if r.methods and r.kind != "fetch":
            raise ConfigError(f"{where}.methods: only fetch rules have methods")
        if r.arguments and r.kind != "tool":
            raise ConfigError(f"{where}.arguments: only tool rules match arguments")
        if r.id is not None:
            if r.id in seen or r.id.startswith(("grant:", "hardline:", "category:", "default:")):
                raise ConfigError(f"{where}.id: {r.id!r} is used twice or reserved")
            seen.add(r.id)


class RuleIndex:
    """Rules grouped by kind and decision; exec rules also by program name."""

    def __init__(self, rules: Iterable[Rule]) -> None:
        self.by: dict[tuple[str, str], list[Rule]] = {}
        self.exec_by_program: dict[tuple[str, str], list[Rule]] = {}
        self.exec_wild: dict[str, list[Rule]] = {}
        self._unions: dict[tuple[str, str, str], re.Pattern[str]] = {}
        for rule in rules:
            self.by.setdefault((rule.kind, rule.decision), []).append(rule)
            if rule.kind == "exec":
                program = rule.matcher.program
                if program is None:
                    self.exec_wild.setdefault(rule.decision, []).append(rule)
                else:
                    self.exec_by_program.setdefault((rule.decision, program), []).append(rule)

    def get(self, kind: str, decision: str) -> list[Rule]:
        return self.by.get((kind, decision), [])

    def path_rules(
        self, kind: str, decision: str, path: str, workspace: str, context: Context, now: float
    ) -> Rule | None:
        """The first active path rule matching ``path``. One regular expression made of
        all of them is tried first, so a path no rule names costs a single match."""
        rules = self.by.get((kind, decision))
        if not rules:
            return None
        key = (kind, decision, workspace)
        union = self._unions.get(key)
        if union is None:
            union = re.compile("|".join(f"(?:{r.matcher.regex(workspace).pattern})" for r in rules))
            self._unions[key] = union
        rel = path.lstrip("/")
        if not (union.match(rel) or union.match(rel + "/")):
            return None
        for rule in rules:
            if rule.active(context, now) and rule.matcher.match(path, workspace):
                return rule
        return None

    def exec_candidates(self, decision: str, program: str | None) -> list[Rule]:
        named = self.exec_by_program.get((decision, program or ""), []) if program else []
        wild = self.exec_wild.get(decision, [])
        return named + wild if wild else named

    def first(
        self, kind: str, decision: str, context: Context, now: float, test: Callable[[Rule], bool]
    ) -> Rule | None:
        for rule in self.get(kind, decision):
            if rule.active(context, now) and test(rule):
                return rule
        return None
