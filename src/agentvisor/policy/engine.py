"""The policy engine: one decision per action, always with its reason.

For each piece of an action (each simple command of an exec, or the one path, host,
secret or tool of the other kinds) the order is:

    1. hardline category        deny, and nothing below can change it
    2. deny rule                deny
    3. ask rule                 ask
    4. allow rule or grant      allow (this is how a person lifts a category's ask)
    5. ask category             ask
    6. the default for the kind

An exec is as strict as its strictest simple command (deny > ask > allow).
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections import OrderedDict

from ..actions import SEVERITY, Action, Context, Decision
from ..records import Record, init
from .rules import Rule, RuleIndex, compile_matcher, compile_rules

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from typing import Any

    from .categories import Finding, Judge

_CACHE_SIZE = 4096
_UNSET: Any = object()


class _Piece(Record):
    """The verdict on one piece of an action."""

    __match_args__ = (
        "verdict",
        "reason",
        "rule",
        "text",
        "hardline",
        "categories",
        "pattern",
        "by_rule",
    )
    __slots__ = __match_args__
    verdict: str
    reason: str
    rule: str
    text: str
    hardline: bool
    categories: tuple[str, ...]
    pattern: str | None  # a pattern that would allow exactly this piece
    by_rule: bool  # decided by a rule or grant (not a category or default)

    def __init__(
        self,
        verdict: str,
        reason: str,
        rule: str,
        text: str,
        hardline: bool = False,
        categories: tuple[str, ...] = (),
        pattern: str | None = None,
        by_rule: bool = False,
    ) -> None:
        init(self, "verdict", verdict)
        init(self, "reason", reason)
        init(self, "rule", rule)
        init(self, "text", text)
        init(self, "hardline", hardline)
        init(self, "categories", categories)
        init(self, "pattern", pattern)
        init(self, "by_rule", by_rule)


class _Analyzed(Record):
    """An exec after analysis and category checks: cached per command and workspace."""

    __match_args__ = ("pieces", "notes")
    __slots__ = __match_args__
    pieces: tuple[tuple[Any, tuple[Finding, ...], tuple[str, ...], tuple[str, ...]], ...]
    notes: tuple[Finding, ...]

    def __init__(
        self,
        pieces: tuple[tuple[Any, tuple[Finding, ...], tuple[str, ...], tuple[str, ...]], ...],
        notes: tuple[Finding, ...],
    ) -> None:
        init(self, "pieces", pieces)
        init(self, "notes", notes)


class PolicyEngine:
    """Decides allow / ask / deny for actions. Build it with `from_config`."""

    def __init__(
        self,
        rules: list[Rule],
        categories: set[str] | frozenset[str],
        defaults: dict[str, str],
        write_roots: list[str] | None = None,
        grants: Any = None,
        home: str | None = None,
        sandbox_shows: Any = None,
    ) -> None:
        """``sandbox_shows(path, workspace)``: whether the isolating sandbox that runs the
        commands can see ``path`` at all (None: commands run unisolated)."""
        self.home = home or os.path.expanduser("~")
        self.rules = RuleIndex(rules)
        self.rule_list = rules
        self.defaults = defaults
        self.write_roots = [os.path.normpath(os.path.expanduser(p)) for p in write_roots or []]
        self.categories = frozenset(categories)
        self._judge: Judge | None = None
        self.grants = grants
        self._grant_key: tuple[str, ...] = ()
        self._grant_index = RuleIndex([])
        self._cache: OrderedDict[tuple[Any, ...], _Analyzed] = OrderedDict()
        self._lock = threading.Lock()  # the gateway decides from several threads
        self.sandbox_shows = sandbox_shows

    @property
    def judge(self) -> Judge:
        """The category checks; loaded on first use (they import the shell analyser)."""
        if self._judge is None:
            from .categories import Judge

            self._judge = Judge(self.home, self.categories)
        return self._judge

    @classmethod
    def from_config(
        cls, config: Any, grants: Any = _UNSET, home: str | None = None
    ) -> PolicyEngine:
        """The engine for a loaded `agentvisor.config.Config`. Grants come from the state
        directory unless a `GrantStore` (or None for no grants) is passed."""
        if grants is _UNSET:
            from ..grants import GrantStore

            grants = GrantStore.from_config(config)
        home = home or os.path.expanduser("~")
        policy = config.policy
        enabled = {name for name, on in policy.categories.model_dump().items() if on}
        defaults = {
            k: getattr(policy.defaults, k) for k in ("exec", "read", "write", "secret", "tool")
        }
        return cls(
            compile_rules(config, home),
            enabled,
            defaults,
            list(config.files.write_roots),
            grants,
            home,
            _sandbox_view(config, home),
        )

    # --- public API -------------------------------------------------------------------

    def decide(self, action: Action, context: Context) -> Decision:
        now = time.time()
        workspace = os.path.normpath(context.workspace or os.getcwd())
        grants = self._grants(now)
        if action.kind == "exec":
            pieces = self._exec(action, context, workspace, grants, now)
        elif action.kind in ("read", "write"):
            pieces = [self._path(action, context, workspace, grants, now)]
        elif action.kind == "fetch":
            pieces = [self._fetch(action, context, grants, now)]
        elif action.kind == "secret":
            pieces = [self._secret(action, context, grants, now)]
        elif action.kind == "tool":
            pieces = [self._tool(action, context, grants, now)]
        else:
            return Decision("deny", f"unknown action kind {action.kind!r}", "default:unknown")
        return _combine(action, pieces)

    def allows_exact_host(self, host: str, port: int | None, context: Context) -> Decision | None:
        """The allowing decision when an allow rule or grant names exactly ``host`` (no
        wildcard; its port too, if it names one) and no deny rule matches; else None.
        The network guard lets private and internal destinations through only this way."""
        from .hosts import normalize_host

        now = time.time()
        host = normalize_host(host)
        for index in (self.rules, self._grants(now)):
            for rule in index.get("fetch", "deny"):
                if rule.active(context, now) and rule.matcher.match(host, port):
                    return None
        for index in (self.rules, self._grants(now)):
            for rule in index.get("fetch", "allow"):
                m = rule.matcher
                if m.exact and rule.active(context, now) and m.match(host, port):
                    return Decision(
                        "allow",
                        f"{host} is allowed by name by {rule.name}",
                        rule.name,
                        patterns=(rule.pattern,),
                    )
        return None

    # --- kinds ------------------------------------------------------------------------

    def _exec(
        self, action: Action, context: Context, workspace: str, grants: RuleIndex, now: float
    ) -> list[_Piece]:
        analyzed = self._analyze(action, workspace)
        pieces: list[_Piece] = []
        for inv, findings, reads, writes in analyzed.pieces:
            rule = self._find_exec(inv, context, grants, now, reads, writes, workspace)
            pattern = _exec_pattern(inv)
            pieces.append(
                self._piece(
                    inv.text,
                    findings,
                    rule,
                    pattern,
                    "exec",
                    self.defaults["exec"],
                    "it runs in the sandbox",
                )
            )
        for f in analyzed.notes:
            pieces.append(_finding_piece(f, f.piece or action.target))
        if not pieces:
            pieces.append(
                _Piece("allow", "there is no command to run", "default:exec", action.target)
            )
        return pieces

    def _find_exec(
        self,
        inv: Any,
        context: Context,
        grants: RuleIndex,
        now: float,
        reads: tuple[str, ...],
        writes: tuple[str, ...],
        workspace: str,
    ) -> tuple[str, Rule] | None:
        for decision in ("deny", "ask", "allow"):
            for index in (self.rules,) if decision != "allow" else (self.rules, grants):
                for rule in index.exec_candidates(decision, inv.program):
                    if rule.active(context, now) and rule.matcher.match(inv, decision == "allow"):
                        return decision, rule
            if decision == "allow":
                break
            # A path rule for reading or writing also holds for commands that do it.
            for kind, paths in (("read", reads), ("write", writes)):
                for path in paths:
                    rule = self.rules.path_rules(kind, decision, path, workspace, context, now)
                    if rule is not None:
                        return decision, rule
        return None

    def _path(
        self, action: Action, context: Context, workspace: str, grants: RuleIndex, now: float
    ) -> _Piece:
        path = _absolute(action.target, workspace, self.home)
        kind = action.kind
        findings = tuple(
            self.judge.read_path(path) if kind == "read" else self.judge.write_path(path)
        )
        rule = self._find_path(kind, path, workspace, context, grants, now)
        default = self.defaults[kind]
        why = "reading is not restricted by default"
        if kind == "write":
            inside = [workspace, *self.write_roots]
            if any(path == root or path.startswith(root.rstrip("/") + "/") for root in inside):
                default, why = "allow", "it is inside the workspace"
            else:
                why = "it is outside the workspace and files.write_roots"
        return self._piece(
            f"{kind} {path}", findings, rule, _home_form(path, self.home), kind, default, why
        )

    def _fetch(self, action: Action, context: Context, grants: RuleIndex, now: float) -> _Piece:
        from .hosts import classify, default_port, split_target

        try:
            scheme, host, port = split_target(action.target)
        except ValueError as exc:
            return _Piece("deny", f"cannot fetch: {exc}", "default:fetch", action.target)
        if scheme and scheme not in ("http", "https"):
            return _Piece(
                "deny",
                f"only http and https can be fetched, not {scheme}:",
                "default:fetch",
                action.target,
            )
        if not host:
            return _Piece(
                "deny", f"{action.target!r} names no host", "default:fetch", action.target
            )
        port = port or default_port(scheme or "https")
        method = (action.method or "GET").upper()
        piece = f"{method} {host}" + (f":{port}" if port not in (80, 443, None) else "")
        findings: tuple[Finding, ...] = tuple(self.judge.fetch_host(host, piece))
        rule = self._find(
            "fetch",
            context,
            grants,
            now,
            lambda r: r.matcher.match(host, port) and (r.methods is None or method in r.methods),
        )
        pattern = host if port in (80, 443, None) else f"{host}:{port}"
        if context.tool == "proxy":
            findings = tuple(f for f in findings if f.hardline)
            return self._piece(
                piece,
                findings,
                rule,
                pattern,
                "fetch",
                "deny",
                "the egress proxy lets through only what a rule allows",
            )
        if context.tool == "web_extract" and method == "GET" and classify(host) is None:
            return self._piece(
                piece,
                findings,
                rule,
                pattern,
                "fetch",
                "allow",
                "web_extract may read public pages",
            )
        return self._piece(
            piece, findings, rule, pattern, "fetch", "ask", "no rule allows this destination"
        )

    def _secret(self, action: Action, context: Context, grants: RuleIndex, now: float) -> _Piece:
        from .hosts import split_target

        name = action.target
        host: str | None = None
        port: int | None = None
        if action.host:
            try:
                _, host, port = split_target(action.host)
            except ValueError:
                host = action.host.lower()
        rule = self._find(
            "secret", context, grants, now, lambda r: r.matcher.match(name, host, port)
        )
        where = f" toward {host}" if host else ""
        return self._piece(
            f"secret {name}{where}",
            (),
            rule,
            f"{name}@{host}" if host else name,
            "secret",
            self.defaults["secret"],
            "secrets are used only where a rule allows",
        )

    def _tool(self, action: Action, context: Context, grants: RuleIndex, now: float) -> _Piece:
        name = action.target
        rule = self._find("tool", context, grants, now, lambda r: r.matcher.match(name))
        return self._piece(
            f"tool {name}",
            (),
            rule,
            name,
            "tool",
            self.defaults["tool"],
            "tools are used only where a rule allows",
        )

    # --- shared steps -----------------------------------------------------------------

    def _find(
        self, kind: str, context: Context, grants: RuleIndex, now: float, test: Any
    ) -> tuple[str, Rule] | None:
        for decision in ("deny", "ask", "allow"):
            for index in (self.rules,) if decision != "allow" else (self.rules, grants):
                rule = index.first(kind, decision, context, now, test)
                if rule is not None:
                    return decision, rule
        return None

    def _find_path(
        self, kind: str, path: str, workspace: str, context: Context, grants: RuleIndex, now: float
    ) -> tuple[str, Rule] | None:
        for decision in ("deny", "ask", "allow"):
            for index in (self.rules,) if decision != "allow" else (self.rules, grants):
                rule = index.path_rules(kind, decision, path, workspace, context, now)
                if rule is not None:
                    return decision, rule
        return None

    def _piece(
        self,
        text: str,
        findings: tuple[Finding, ...],
        rule: tuple[str, Rule] | None,
        pattern: str | None,
        kind: str,
        default: str,
        why: str,
    ) -> _Piece:
        hard = next((f for f in findings if f.hardline), None)
        if hard is not None:
            return _finding_piece(hard, text)
        cats = tuple(dict.fromkeys(f.category for f in findings))
        if rule is not None:
            decision, r = rule
            if decision != "allow":
                words = {"deny": "denied", "ask": "needs approval"}[decision]
                note = f" ({r.reason})" if r.reason else ""
                return _Piece(
                    decision,
                    f"{text}: {words} by {r.name}{note}",
                    r.name,
                    text,
                    categories=cats,
                    pattern=pattern,
                    by_rule=True,
                )
            lifted = f"; it would otherwise ask: {findings[0].reason}" if findings else ""
            return _Piece(
                "allow",
                f"{text}: allowed by {r.name}{lifted}",
                r.name,
                text,
                categories=cats,
                pattern=pattern,
                by_rule=True,
            )
        asks = [f for f in findings if f.verdict != "allow"]
        if asks:
            first = asks[0]
            return _Piece(
                "ask",
                first.reason,
                f"category:{first.category}",
                text,
                categories=cats,
                pattern=pattern,
            )
        words = {"allow": "allowed", "ask": "needs approval", "deny": "denied"}[default]
        return _Piece(
            default,
            f"{text}: {words}: {why} (default for {kind}: {default})",
            f"default:{kind}",
            text,
            pattern=pattern,
        )

    def _analyze(self, action: Action, workspace: str) -> _Analyzed:
        key = (action.argv, action.target, workspace)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                return hit
        from .analyze import analyze_argv, analyze_source

        if action.argv is not None:
            analysis = analyze_argv(action.argv, workspace, self.home)
        else:
            analysis = analyze_source(action.target, workspace, self.home)
        judge = self.judge
        pieces = tuple(
            (
                inv,
                self._reachable(inv, judge.invocation(inv), workspace),
                tuple(judge.reads(inv)),
                tuple(judge.writes(inv)),
            )
            for inv in analysis.invocations
        )
        result = _Analyzed(pieces, tuple(judge.notes(analysis.notes)))
        with self._lock:
            self._cache[key] = result
            if len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return result

    def _reachable(self, inv: Any, findings: list[Finding], workspace: str) -> tuple[Finding, ...]:
        """A script's arguments are its own data: whether ``python3 ./probe.py ~/.ssh/key``
        reads the key is unknowable. When the sandbox cannot even see that file, the read
        would fail inside, so such a finding is dropped. A tool that is known to read its
        operands (``cat ~/.ssh/key``) still asks: its intent is plain."""
        if self.sandbox_shows is None or not _runs_script_file(inv):
            return tuple(findings)
        return tuple(
            f
            for f in findings
            if f.category != "credentials" or self.sandbox_shows(f.piece, workspace)
        )

    def _grants(self, now: float) -> RuleIndex:
        if self.grants is None:
            return self._grant_index
        active = self.grants.active(now)
        key = tuple(g.id for g in active)
        if key != self._grant_key:
            from .rules import Condition

            rules = []
            for g in active:
                try:
                    matcher = compile_matcher(g.kind, g.pattern, self.home)
                except ValueError:
                    continue  # a grant written by hand that does not compile grants nothing
                when = Condition(session=(g.session,)) if g.session else None
                rules.append(
                    Rule(
                        "allow",
                        g.kind,
                        g.pattern,
                        f"grant:{g.id}",
                        matcher,
                        when,
                        None,
                        g.expires_at,
                        g.reason,
                    )
                )
            self._grant_index = RuleIndex(rules)
            self._grant_key = key
        return self._grant_index


def _finding_piece(f: Finding, text: str) -> _Piece:
    prefix = "hardline" if f.hardline else "category"
    return _Piece(
        f.verdict,
        f.reason,
        f"{prefix}:{f.category}",
        text,
        hardline=f.hardline,
        categories=(f.category,),
    )


def _exec_pattern(inv: Any) -> str | None:
    if inv.program is None or any(f.dynamic for f in inv.argv):
        return None
    return shlex.join(f.text for f in inv.argv)


def _absolute(target: str, workspace: str, home: str) -> str:
    if target == "~" or target.startswith("~/"):
        target = home + target[1:]
    if not target.startswith("/"):
        target = os.path.join(workspace, target)
    norm = os.path.normpath(target)
    return "/" + norm.lstrip("/")


def _home_form(path: str, home: str) -> str:
    if path.startswith(home.rstrip("/") + "/"):
        return "~" + path[len(home.rstrip("/")) :]
    return path


def _combine(action: Action, pieces: list[_Piece]) -> Decision:
    worst = max(pieces, key=lambda p: SEVERITY[p.verdict])
    verdict = worst.verdict
    details = tuple(
        dict.fromkeys(
            p.reason if p.text in p.reason else f"{p.text}: {p.reason}"
            for p in pieces
            if p.verdict != "allow" or p.by_rule
        )
    )
    categories = tuple(
        dict.fromkeys(c for p in pieces if p.verdict != "allow" for c in p.categories)
    )
    patterns: tuple[str, ...] = ()
    if verdict == "ask":
        asking = [p for p in pieces if p.verdict == "ask"]
        if all(p.pattern for p in asking):
            patterns = tuple(dict.fromkeys(p.pattern for p in asking if p.pattern))
    reason = worst.reason
    if verdict == "allow" and not worst.by_rule:
        ruled = next((p for p in pieces if p.by_rule), None)
        worst = ruled or worst
        reason = worst.reason
    return Decision(
        verdict,
        reason,
        worst.rule,
        worst.hardline,
        _hint(action, worst, patterns) if verdict != "allow" else None,
        details[:20],
        categories,
        patterns,
    )


def _hint(action: Action, piece: _Piece, patterns: tuple[str, ...]) -> str:
    if piece.hardline:
        category = piece.rule.split(":", 1)[1]
        return (
            "This is on agentvisor's hardline floor: no rule, grant, approval or "
            "approvals.mode can allow it. If it is really meant, a person can run it "
            "outside agentvisor, or switch the category off in the config "
            f"(policy.categories.{category}: false)."
        )
    if piece.by_rule:
        return f"A person can change or remove {piece.rule} in the config" + (
            ", or approve it when asked." if piece.verdict == "ask" else "."
        )
    kind = action.kind
    if patterns:
        quoted = " ".join(shlex.quote(p) for p in patterns[:1])
        allow = (
            f"`agentvisor grant {kind} {quoted} --for 30m`, or a rule "
            f"`{{decision: allow, kind: {kind}, pattern: {_yaml(patterns[0])}}}` under "
            "rules: in the config"
        )
    else:
        allow = (
            "a rule under rules: in the config (the command has parts that are only "
            "known when it runs, so no exact pattern can be suggested)"
        )
    text = (
        "A person can approve it when asked" if piece.verdict == "ask" else "A person can allow it"
    )
    text += f", or allow it ahead of time: {allow}"
    if piece.rule.startswith("category:"):
        text += f"; or switch the category off (policy.categories.{piece.rule[9:]}: false)"
    return text + "."


def _yaml(text: str) -> str:
    import json

    return json.dumps(text)


def _sandbox_view(config: Any, home: str) -> Any:
    """What an isolating sandbox of this config shows, as a predicate; None for ``local``."""
    if config.sandbox.backend == "local":
        return None
    from pathlib import Path

    from .. import protected
    from ..config import parse_mount

    mounts = [str(parse_mount(m).host) for m in config.sandbox.mounts]
    hidden = [str(p) for p in protected.protected_paths(config.sandbox.protected_paths, Path(home))]

    def shows(path: str, workspace: str) -> bool:
        return protected.visible_in_sandbox(
            path, [workspace, *mounts, *protected.SYSTEM_BINDS], hidden
        )

    return shows


def _runs_script_file(inv: Any) -> bool:
    """A program from the workspace (``./tool``), or a shell or interpreter running a script
    file rather than inline code: its arguments mean what the script makes of them."""
    from . import knowledge

    if not inv.program or not inv.argv:
        return False
    head = inv.argv[0].text
    if "/" in head and not head.startswith(("/usr/", "/bin/", "/sbin/", "/opt/", "/etc/")):
        return True
    if inv.runs_code is not None and inv.runs_code.kind != "file":
        return False  # -c / -e code, or a shell fed on stdin: analysed as code instead
    known = inv.program in knowledge.SHELLS or knowledge.interpreter(inv.program) is not None
    return known and any(not a.text.startswith("-") for a in inv.argv[1:])
