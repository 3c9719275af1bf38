"""The session flow guard: what a session has read decides what it may send.

The "lethal trifecta" is a session that holds private data, has read content an
outsider controls, and can send data out: one injected instruction away from
exfiltration. The gateway sees every call of a session in order, so it can track that.

Every tool carries labels (`LABELS`): built-in ones below, upstream ones from the config
or by name (``upstreams.labels``), and some from what one call does (an ``http_request``
POST is an external write). After each call the guard records what came back; before
each call that writes, it checks where the call's argument values came from:

- ``trifecta`` (the blunt rule): any external write after any untrusted read is an ask.
- ``provenance`` (the default): an ask only when a value the call would send or write
  was copied out of free text that an untrusted call returned (a recipient, an account,
  a host, a password written in an email body or a web page) and the person did not
  name it in the session's task scope. Values that a service returned as whole
  structured fields (a sender, an IBAN in a transaction record, a hotel name in a list)
  and values the agent composed itself pass: injected instructions live in free text,
  and it is values lifted out of such text that carry an attack's target.

The task scope (`TaskScope`) is declared by a person or the operator, never by the agent:
the recipients, hosts, accounts and words of the request (the operator's in the config,
a person's per session with ``agentvisor scope``, kept in `state.scopes.ScopeStore`). A
person's approval of a flow ask widens that scope by exactly the values it was asked
about, for the rest of the session.

Every ask names its rule (``flow:trifecta`` / ``flow:provenance``), the value and the
call that brought the content in.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal

from ..actions import Action, Decision
from ..errors import ConfigError
from ..records import Declared, Default

if TYPE_CHECKING:
    from ..config import FlowConfig
    from ..state.scopes import ScopeStore
    from .session import Session
    from .tools import ToolSpec

FlowMode = Literal["provenance", "trifecta", "off"]

log = logging.getLogger("agentvisor.flow")

LABELS = ("private_read", "untrusted_read", "external_write", "internal_write")
WRITES = frozenset({"external_write", "internal_write"})

# The built-in tools. Terminal commands run with no network; what they print comes from
# the workspace, which the agent itself writes. web_extract and web_search bring in pages
# anyone can write; http_request adds external_write by method (`call_labels`).
BUILTIN_LABELS: dict[str, frozenset[str]] = {
    "terminal": frozenset({"private_read", "internal_write"}),
    "execute_code": frozenset({"private_read", "internal_write"}),
    "process": frozenset(),
    "read_file": frozenset({"private_read"}),
    "search_files": frozenset({"private_read"}),
    "write_file": frozenset({"internal_write"}),
    "patch": frozenset({"internal_write"}),
    "web_search": frozenset({"untrusted_read"}),
    "web_extract": frozenset({"untrusted_read"}),
    "http_request": frozenset({"untrusted_read"}),
}
# A tool nobody labelled (one added through the Python API without labels) may read
# anything and send anything: the guard assumes both. Wasm tools are labelled by their
# capabilities (`wasm.manifest.flow_labels`), upstream ones by config or name.
UNLABELLED = frozenset({"untrusted_read", "external_write"})

# Untrusted text one session keeps for provenance checks. Past it the guard can no longer
# tell where a value came from, so every write after untrusted content asks (fail closed).
TEXT_BUDGET = 32 * 1024 * 1024
# Results larger than this are not parsed for structured fields (all of it is free text).
PARSE_LIMIT = 1024 * 1024
# YAML anchors and aliases: a result that defines both is never parsed (an alias bomb
# expands a few hundred bytes into gigabytes).
_YAML_ALIAS = re.compile(r"(?:^|[\s\[{,:-])&[^\s]+[\s\S]*(?:^|[\s\[{,:-])\*[^\s]+", re.MULTILINE)
# A structured value (a name, an address, an id) is one short line of a few words; a
# longer one is free text, where instructions hide.
FIELD_CHARS = 80
FIELD_WORDS = 8
# Tokens that name a target wherever they stand: e-mail addresses, URLs and host names,
# account numbers (IBAN-like), card numbers and long digit codes.
# Linear time on any input (an agent chooses the arguments): a token starts where no token
# character precedes it, and its runs are possessive, so a long run without a dot or an @
# is read once instead of once per start position.
_TOKENS = re.compile(
    r"(?<![\w.+-])[\w.+-]++@[\w-]++(?:\.[\w-]++)+"
    r"|(?:https?://)?(?<![a-z0-9-])(?:[a-z0-9-]++\.)+[a-z]{2,}(?:/[^\s\"'<>)]*+)?"
    r"|\b[A-Z]{2}\d{2}[A-Z0-9]{10,30}\b"
    r"|\b\d{4}(?:[ -]\d{4}){3}\b"
    r"|\b\d{6,}\b",
    re.IGNORECASE,
)
# Arguments that say where a write goes or what it acts on (by name, as labels are): their
# whole value is checked. Other arguments (a body, a title) are checked for tokens only.
_TARGET_ARGUMENT = re.compile(
    r"recipient|participant|^to$|^cc$|^bcc$|mail|user|url|uri|link|host|domain|iban|account"
    r"|channel|phone|password|secret|token|hotel|restaurant|company|^id$|_id$|path|file",
    re.IGNORECASE,
)
SHORTEST_VALUE = 2  # a one-character value says nothing about where it came from
# More distinct values than this in one call's arguments cannot each be traced through the
# session's untrusted text in reasonable time: the write asks instead (fails closed).
MAX_TRACED = 4096
# A shorter value in the person's words ("13" in "June 13") does not name a target.
SHORTEST_WORDS = 4
# A content value (a title, a body) of this many words or more, found verbatim in
# untrusted text, was copied from it; shorter phrases match by coincidence.
COPIED_WORDS = 5
# Private values shorter than this (a first name, a city) are too common to track.
SHORTEST_PRIVATE = 6


def call_labels(spec: ToolSpec, arguments: Mapping[str, Any]) -> frozenset[str]:
    """The labels of one call: the tool's own, plus what this call does."""
    labels = spec.labels if spec.labels is not None else BUILTIN_LABELS.get(spec.name, UNLABELLED)
    if spec.name == "http_request":
        method = str(arguments.get("method") or "GET").upper()
        if method not in ("GET", "HEAD", "OPTIONS"):
            labels = labels | {"external_write"}
    return labels


class TaskScope(Declared):
    """What the person asked for: the values the agent may send to or write."""

    recipients: frozenset[str] = frozenset()
    hosts: frozenset[str] = frozenset()
    accounts: frozenset[str] = frozenset()
    request: str = ""  # the person's own words; a value they contain is in scope

    @classmethod
    def from_request(cls, text: str, **extra: Iterable[str]) -> TaskScope:
        """A scope from a person's request (and explicit lists): every target it names."""
        tokens = {_norm(t) for t in _TOKENS.findall(text)}
        return cls(
            recipients=frozenset(tokens | {_norm(v) for v in extra.get("recipients", ())}),
            hosts=frozenset(_norm(v) for v in extra.get("hosts", ())),
            accounts=frozenset(_norm(v) for v in extra.get("accounts", ())),
            request=text.lower(),
        )

    def covers(self, value: str) -> bool:
        v = _norm(value)
        return (
            v in self.recipients
            or v in self.hosts
            or v in self.accounts
            or _host(v) in self.hosts
            or (len(v) >= SHORTEST_WORDS and _contains(self.request, v))
        )

    def union(self, other: TaskScope) -> TaskScope:
        return TaskScope(
            recipients=self.recipients | other.recipients,
            hosts=self.hosts | other.hosts,
            accounts=self.accounts | other.accounts,
            request=f"{self.request}\n{other.request}".strip(),
        )

    def widened(self, values: Iterable[str]) -> TaskScope:
        return TaskScope(
            recipients=self.recipients | {_norm(v) for v in values},
            hosts=self.hosts,
            accounts=self.accounts,
            request=self.request,
        )


class Origin(Declared):
    """Which call of the session brought something in."""

    call: int
    tool: str

    def __str__(self) -> str:
        return f"call #{self.call} ({self.tool})"


class SessionFlow(Declared, frozen=False):
    """What one session has seen so far."""

    calls: int = 0
    untrusted: Origin | None = None  # the first call that read untrusted content
    private: Origin | None = None
    # The text of untrusted calls, lower-cased, with the call it came from.
    free_text: list[tuple[Origin, str]] = Default(factory=list)
    # Whole structured field values seen in any result.
    fields: set[str] = Default(factory=set)
    # Field values of calls that read private data only (a profile, an account): these
    # must not flow into an external write the person did not ask for.
    private_fields: dict[str, Origin] = Default(factory=dict)
    scope: TaskScope = Default(factory=TaskScope)
    # What a person declared for this session on the host (`agentvisor scope`), as last read.
    declared: TaskScope = Default(factory=TaskScope)
    # Characters of untrusted text kept; past `TEXT_BUDGET` the session is "overflowed".
    text_chars: int = 0
    overflowed: Origin | None = None


class FlowRule(Declared):
    """An operator's rule on a session's flow (``flow.rules`` in the config), e.g.

        {decision: deny, tool: "mail__*", labels: [external_write],
         when: {session: {read_untrusted: true, read_private: true}},
         arguments: {recipients: "*@example.com"}}

    It applies when the tool's name matches ``tool`` (a glob), the call carries one of
    ``labels`` (if given), the session's state matches ``read_untrusted`` /
    ``read_private`` (if given), and every named argument matches its glob (any item of
    a list may match). Rules are checked before the mode's own judgement; deny wins.
    """

    decision: Literal["ask", "deny"]
    tool: str = "*"
    labels: tuple[str, ...] = ()
    read_untrusted: bool | None = None
    read_private: bool | None = None
    arguments: Mapping[str, str] = Default(factory=dict)
    reason: str | None = None

    def matches(self, tool: str, labels: frozenset[str], flow: SessionFlow, arguments: Any) -> bool:
        from fnmatch import fnmatchcase

        return (
            fnmatchcase(tool, self.tool)
            and (not self.labels or bool(labels & set(self.labels)))
            and (self.read_untrusted is None or self.read_untrusted == (flow.untrusted is not None))
            and (self.read_private is None or self.read_private == (flow.private is not None))
            and all(
                any(fnmatchcase(v.lower(), glob.lower()) for v in _leaves(arguments.get(name)))
                for name, glob in self.arguments.items()
            )
        )


class FlowGuard:
    """One per gateway; keeps a `SessionFlow` per open session."""

    def __init__(
        self,
        mode: FlowMode = "provenance",
        *,
        rules: Iterable[FlowRule] = (),
        scope: TaskScope | None = None,
        scopes: ScopeStore | None = None,
    ) -> None:
        """``scope``: the operator's task scope, where every session starts; ``scopes``:
        the scopes people declared per session (read before each check)."""
        self.mode = mode
        self.rules = tuple(rules)
        self.scope = scope or TaskScope()
        self.scopes = scopes
        self._flows: weakref.WeakKeyDictionary[Session, SessionFlow] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, flow: FlowConfig, scopes: ScopeStore | None = None) -> FlowGuard:
        """From the config's ``flow:`` section (docs/upstreams.md)."""
        rules = [
            FlowRule(
                decision=r.decision,
                tool=r.tool,
                labels=tuple(r.labels),
                read_untrusted=r.when.session.read_untrusted if r.when else None,
                read_private=r.when.session.read_private if r.when else None,
                arguments=dict(r.arguments),
                reason=r.reason,
            )
            for r in flow.rules
        ]
        scope = TaskScope(
            recipients=frozenset(_norm(v) for v in flow.scope.recipients),
            hosts=frozenset(_norm(v) for v in flow.scope.hosts),
            accounts=frozenset(_norm(v) for v in flow.scope.accounts),
        )
        return cls(flow.mode, rules=rules, scope=scope, scopes=scopes)

    def flow(self, session: Session) -> SessionFlow:
        with self._lock:
            flow = self._flows.get(session)
            if flow is None:
                flow = self._flows[session] = SessionFlow(scope=self.scope)
            return flow

    def forget(self, session: Session) -> None:
        """Drop what a closed session read at once (its untrusted text can be large),
        not whenever its last reference goes."""
        with self._lock:
            self._flows.pop(session, None)

    def set_scope(self, session: Session, scope: TaskScope) -> None:
        """Declare the session's task scope (with the operator's, from the config). For
        people and the operator: no tool an agent can call reaches this."""
        self.flow(session).scope = self.scope.union(scope)

    # -- before a call ------------------------------------------------------------------

    def check(
        self, session: Session, spec: ToolSpec, arguments: Mapping[str, Any]
    ) -> Decision | None:
        """None when the call may go on; else an ``ask`` naming the rule and the source."""
        labels = call_labels(spec, arguments)
        flow = self.flow(session)
        ruled = self._rules(spec.name, labels, flow, arguments)
        if ruled is not None and (ruled.verdict == "deny" or self.mode == "off"):
            return ruled
        if self.mode == "off" or flow.untrusted is None or not labels & WRITES:
            return ruled
        if self.mode == "trifecta":
            if "external_write" not in labels:
                return None
            return Decision(
                "ask",
                f"{spec.name} can send data out, and this session has read content "
                f"an outsider controls ({flow.untrusted})",
                rule="flow:trifecta",
            )
        if flow.overflowed is not None:
            return Decision(
                "ask",
                f"{spec.name} would write after this session read more untrusted text than "
                f"the flow guard tracks ({TEXT_BUDGET // 2**20} MiB, exceeded at "
                f"{flow.overflowed}): where its values came from cannot be told",
                rule="flow:provenance",
            )
        self._read_declared(session, flow)
        try:
            tainted = list(_tainted(flow, arguments))
        except _TooManyValues:
            return Decision(
                "ask",
                f"{spec.name} would write more than {MAX_TRACED} distinct values after this "
                f"session read content an outsider controls ({flow.untrusted}): where they "
                "came from cannot be traced",
                rule="flow:provenance",
            )
        if "external_write" in labels:
            tainted += _private(flow, arguments)
        if not tainted:
            return ruled
        value, origin = tainted[0]
        return Decision(
            "ask",
            f"{spec.name} would {'send' if 'external_write' in labels else 'write'} "
            f"{_shown(value)}, which came from content an outsider controls ({origin}) "
            "and is not in the task's scope",
            rule="flow:provenance",
            details=tuple(f"{_shown(v)} from {o}" for v, o in tainted),
            hint="if the person meant it, approve it: that adds exactly these values to "
            "the session's task scope",
        )

    def _read_declared(self, session: Session, flow: SessionFlow) -> None:
        """The scope a person declared for the session on the host, as it is now."""
        if self.scopes is None:
            return
        try:
            declared = self.scopes.get(session.id)
        except ConfigError as exc:
            # Without it the scope is narrower, never wider: the guard asks more.
            log.warning("session scopes not read: %s", exc)
            declared = {}
        flow.declared = TaskScope.from_request(
            "\n".join(declared.get("request", [])),
            recipients=declared.get("recipient", []),
            hosts=declared.get("host", []),
            accounts=declared.get("account", []),
        )

    def _rules(
        self, tool: str, labels: frozenset[str], flow: SessionFlow, arguments: Mapping[str, Any]
    ) -> Decision | None:
        found = None
        for index, rule in enumerate(self.rules):
            if not rule.matches(tool, labels, flow, arguments):
                continue
            decision = Decision(
                rule.decision,
                rule.reason or f"{tool}: {rule.decision} by flow.rules[{index}] ({_state(flow)})",
                rule=f"flow.rules[{index}]",
            )
            if rule.decision == "deny":
                return decision
            found = found or decision
        return found

    def gate(
        self,
        session: Session,
        spec: ToolSpec,
        arguments: Mapping[str, Any],
        resolve: Callable[[Action, Decision], Decision],
    ) -> tuple[Action, Decision] | None:
        """The hook before a call runs: None when the guard has nothing to say, else the
        action it asked about and the answer (``resolve``: the approval broker)."""
        asked = self.check(session, spec, arguments)
        if asked is None:
            return None
        action = flow_action(spec, arguments)
        decision = resolve(action, asked)
        if decision.allowed:
            self.approved(session, arguments, asked)
        return action, decision

    def approved(self, session: Session, arguments: Mapping[str, Any], asked: Decision) -> None:
        """A person let an asked call through: the values they saw in the ask are in the
        task's scope for the rest of the session (exactly these, nothing broader)."""
        if asked.rule != "flow:provenance":
            return
        flow = self.flow(session)
        values = [v for v, _ in _tainted(flow, arguments)] + [
            v for v, _ in _private(flow, arguments)
        ]
        flow.scope = flow.scope.widened(values)

    # -- after a call -------------------------------------------------------------------

    def record(
        self, session: Session, spec: ToolSpec, arguments: Mapping[str, Any], text: str
    ) -> None:
        labels = call_labels(spec, arguments)
        flow = self.flow(session)
        flow.calls += 1
        origin = Origin(call=flow.calls, tool=spec.name)
        if "private_read" in labels and flow.private is None:
            flow.private = origin
        fields, free = _split(text)
        flow.fields |= fields
        if "private_read" in labels and "untrusted_read" not in labels:
            for value in fields:
                if len(value) >= SHORTEST_PRIVATE:
                    flow.private_fields.setdefault(value, origin)
        if "untrusted_read" in labels:
            if flow.untrusted is None:
                flow.untrusted = origin
            flow.text_chars += len(free)
            if flow.text_chars > TEXT_BUDGET:
                flow.overflowed = flow.overflowed or origin
                flow.free_text.clear()
            else:
                flow.free_text.append((origin, free))


class _TooManyValues(Exception):
    """The arguments hold more values than the guard traces (`MAX_TRACED`)."""


def _tainted(flow: SessionFlow, arguments: Mapping[str, Any]) -> Iterator[tuple[str, Origin]]:
    """Argument values (or target tokens inside them) lifted out of untrusted free text."""
    traced = 0
    for name, value in _named_leaves(arguments):
        candidates = list(
            dict.fromkeys(t for t in _TOKENS.findall(value) if _norm(t) != _norm(value))
        )
        if _whole_value_counts(name, value):
            candidates.append(value)
        traced += len(candidates)
        if traced > MAX_TRACED:
            raise _TooManyValues
        for candidate in candidates:
            norm = _norm(candidate)
            # A value some service returned as a whole field (a sender, a file's id, a
            # hotel in a list) is the service's data, even if a text mentions it too.
            if len(norm) < SHORTEST_VALUE or _in_scope(flow, norm) or norm in flow.fields:
                continue
            origin = next((o for o, text in flow.free_text if _contains(text, norm)), None)
            if origin is not None:
                yield candidate, origin


def _in_scope(flow: SessionFlow, value: str) -> bool:
    return flow.scope.covers(value) or flow.declared.covers(value)


def _state(flow: SessionFlow) -> str:
    seen = [f"untrusted content from {flow.untrusted}"] if flow.untrusted else []
    seen += [f"private data from {flow.private}"] if flow.private else []
    return "the session has read " + " and ".join(seen) if seen else "nothing read yet"


def _whole_value_counts(name: str, value: str) -> bool:
    """A target argument's value; a value that is one token; a copied sentence."""
    if _TARGET_ARGUMENT.search(name) and len(value) <= FIELD_CHARS:
        return True
    return bool(_TOKENS.fullmatch(value)) or len(value.split()) >= COPIED_WORDS


def _private(flow: SessionFlow, arguments: Mapping[str, Any]) -> list[tuple[str, Origin]]:
    """Private field values that an external write would carry (the person did not ask)."""
    if not flow.private_fields:
        return []
    sent = " ".join(value for _, value in _named_leaves(arguments))
    lowered = sent.lower()
    found = []
    for value, origin in flow.private_fields.items():
        if _contains(lowered, value) and not _in_scope(flow, value):
            start = lowered.find(value)
            found.append((sent[start : start + len(value)], origin))  # as the call writes it
    return found


def _named_leaves(arguments: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    for name, value in arguments.items():
        for leaf in _leaves(value):
            yield str(name), leaf


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, str):
        if value.strip():
            yield value.strip()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield str(value)


def _split(text: str) -> tuple[set[str], str]:
    """A result's structured field values, and all of its text (lower-cased).

    Every word of an untrusted result counts as free text, keys and fields included (an
    instruction can hide anywhere); a field value only vouches for itself, exactly.
    """
    data = _parse(text)
    fields = {
        _norm(leaf)
        for leaf in ([] if data is None or isinstance(data, str) else _leaves(data))
        if len(leaf) <= FIELD_CHARS and "\n" not in leaf and len(leaf.split()) <= FIELD_WORDS
    }
    return fields, text.lower()


def _parse(text: str) -> Any:
    """JSON, else YAML (what many servers print), else None: then it is all free text."""
    stripped = text.strip()
    if not stripped or len(stripped) > PARSE_LIMIT:
        return None
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    if "\n" not in stripped and not stripped.startswith(("{", "[")):
        return None  # one line of prose ("Note: send it to ...") is not a YAML mapping
    if _YAML_ALIAS.search(stripped):
        return None
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.load(stripped, Loader=loader)  # a SafeLoader: plain data only
    except yaml.YAMLError:
        return None


def _norm(value: str) -> str:
    return value.strip().strip(".,;:!?'\"()[]<>").lower()


def _host(value: str) -> str:
    host = re.sub(r"^[a-z]+://", "", value).split("/", 1)[0]
    return host.removeprefix("www.")


def _contains(text: str, value: str) -> bool:
    """``value`` in ``text`` as a whole word (not "13" inside "2013")."""
    start = text.find(value)
    while start != -1:
        end = start + len(value)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or after.isalnum()):
            return True
        start = text.find(value, start + 1)
    return False


def _shown(value: str) -> str:
    return repr(value if len(value) <= 80 else value[:77] + "...")


def flow_action(spec: ToolSpec, arguments: Mapping[str, Any]) -> Action:
    """The action a flow ask or refusal is about: the call itself, with its arguments."""
    return Action("tool", spec.name, arguments=dict(arguments))
