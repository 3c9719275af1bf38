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
import time

from ..actions import Action, Context, Decision
from .lookup import GrantRules, find, find_exec, find_path
from .rules import Rule, RuleIndex, arguments_match, compile_rules
from .verdicts import Piece, combine, finding_piece, piece_for

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from typing import Any

    from .analyzed import AnalysisCache
    from .judge import Finding, Judge

_UNSET: Any = object()


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
        contained: str = "it runs in the sandbox",
    ) -> None:
        """``sandbox_shows(path, workspace)``: whether the isolating sandbox that runs the
        commands can see ``path`` at all (None: commands run unisolated). ``contained``: why
        a command nothing else decided is allowed, as true for this configuration."""
        self.contained = contained
        self.home = home or os.path.expanduser("~")
        self.rules = RuleIndex(rules)
        self.defaults = defaults
        self.write_roots = [os.path.normpath(os.path.expanduser(p)) for p in write_roots or []]
        self.categories = frozenset(categories)
        self._judge: Judge | None = None
        self.grants = grants
        self._grant_rules = GrantRules(grants, self.home)
        self._analyses: AnalysisCache | None = None
        self.sandbox_shows = sandbox_shows

    @property
    def judge(self) -> Judge:
        """The category checks; loaded on first use (they import the shell analyser)."""
        if self._judge is None:
            from .judge import Judge

            self._judge = Judge(self.home, self.categories)
        return self._judge

    @property
    def analyses(self) -> AnalysisCache:
        """Commands analysed and judged, cached per command and workspace."""
        if self._analyses is None:
            from .analyzed import AnalysisCache

            self._analyses = AnalysisCache(self.judge, self.sandbox_shows)
        return self._analyses

    @classmethod
    def from_config(
        cls, config: Any, grants: Any = _UNSET, home: str | None = None
    ) -> PolicyEngine:
        """The engine for a loaded `agentvisor.config.Config`. Grants come from the state
        directory unless a `GrantStore` (or None for no grants) is passed."""
        if grants is _UNSET:
            from ..state.grants import GrantStore

            grants = GrantStore.from_config(config)
        home = home or os.path.expanduser("~")
        policy = config.policy
        from .categories import CATEGORIES

        # A category the config schema does not know yet is on: switching off is explicit.
        switches = policy.categories.model_dump()
        enabled = {name for name in CATEGORIES if switches.get(name, True)}
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
            containment(config),
        )

    # --- public API -------------------------------------------------------------------

    def decide(self, action: Action, context: Context) -> Decision:
        now = time.time()
        workspace = os.path.normpath(context.workspace or os.getcwd())
        grants = self._grant_rules.index(now)
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
        return combine(action, pieces)

    def allows_exact_host(self, host: str, port: int | None, context: Context) -> Decision | None:
        """The allowing decision when an allow rule or grant names exactly ``host`` (no
        wildcard; its port too, if it names one) and no deny rule matches; else None.
        The network guard lets private and internal destinations through only this way."""
        from .hosts import normalize_host

        now = time.time()
        host = normalize_host(host)
        for index in (self.rules, self._grant_rules.index(now)):
            for rule in index.get("fetch", "deny"):
                if rule.active(context, now) and rule.matcher.match(host, port):
                    return None
        for index in (self.rules, self._grant_rules.index(now)):
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
    ) -> list[Piece]:
        analyzed = self.analyses.get(action, workspace)
        pieces: list[Piece] = []
        for inv, findings, reads, writes in analyzed.pieces:
            rule = find_exec(self.rules, grants, inv, context, now, reads, writes, workspace)
            pattern = _exec_pattern(inv)
            pieces.append(
                piece_for(
                    inv.text,
                    findings,
                    rule,
                    pattern,
                    "exec",
                    self.defaults["exec"],
                    self.contained,
                )
            )
        for f in analyzed.notes:
            pieces.append(finding_piece(f, f.piece or action.target))
        if not pieces:
            pieces.append(
                Piece("allow", "there is no command to run", "default:exec", action.target)
            )
        return pieces

    def _path(
        self, action: Action, context: Context, workspace: str, grants: RuleIndex, now: float
    ) -> Piece:
        path = _absolute(action.target, workspace, self.home)
        kind = action.kind
        findings = tuple(
            self.judge.read_path(path) if kind == "read" else self.judge.write_path(path)
        )
        rule = find_path(self.rules, grants, kind, path, workspace, context, now)
        default = self.defaults[kind]
        why = "reading is not restricted by default"
        if kind == "write":
            inside = [workspace, *self.write_roots]
            if any(path == root or path.startswith(root.rstrip("/") + "/") for root in inside):
                default, why = "allow", "it is inside the workspace"
            else:
                why = "it is outside the workspace and files.write_roots"
        return piece_for(
            f"{kind} {path}", findings, rule, _home_form(path, self.home), kind, default, why
        )

    def _fetch(self, action: Action, context: Context, grants: RuleIndex, now: float) -> Piece:
        from .hosts import classify, default_port, split_target

        try:
            scheme, host, port = split_target(action.target)
        except ValueError as exc:
            return Piece("deny", f"cannot fetch: {exc}", "default:fetch", action.target)
        if scheme and scheme not in ("http", "https"):
            return Piece(
                "deny",
                f"only http and https can be fetched, not {scheme}:",
                "default:fetch",
                action.target,
            )
        if not host:
            return Piece("deny", f"{action.target!r} names no host", "default:fetch", action.target)
        port = port or default_port(scheme or "https")
        method = (action.method or "GET").upper()
        piece = f"{method} {host}" + (f":{port}" if port not in (80, 443, None) else "")
        findings: tuple[Finding, ...] = tuple(self.judge.fetch_host(host, piece))
        rule = find(
            self.rules,
            grants,
            "fetch",
            context,
            now,
            lambda r: r.matcher.match(host, port) and (r.methods is None or method in r.methods),
        )
        pattern = host if port in (80, 443, None) else f"{host}:{port}"
        if context.tool == "proxy":
            findings = tuple(f for f in findings if f.hardline)
            return piece_for(
                piece,
                findings,
                rule,
                pattern,
                "fetch",
                "deny",
                "the egress proxy lets through only what a rule allows",
            )
        if context.tool == "web_extract" and method == "GET" and classify(host) is None:
            return piece_for(
                piece,
                findings,
                rule,
                pattern,
                "fetch",
                "allow",
                "web_extract may read public pages",
            )
        return piece_for(
            piece, findings, rule, pattern, "fetch", "ask", "no rule allows this destination"
        )

    def _secret(self, action: Action, context: Context, grants: RuleIndex, now: float) -> Piece:
        from .hosts import split_target

        name = action.target
        host: str | None = None
        port: int | None = None
        if action.host:
            try:
                _, host, port = split_target(action.host)
            except ValueError:
                host = action.host.lower()
        rule = find(
            self.rules, grants, "secret", context, now, lambda r: r.matcher.match(name, host, port)
        )
        where = f" toward {host}" if host else ""
        return piece_for(
            f"secret {name}{where}",
            (),
            rule,
            f"{name}@{host}" if host else name,
            "secret",
            self.defaults["secret"],
            "secrets are used only where a rule allows",
        )

    def _tool(self, action: Action, context: Context, grants: RuleIndex, now: float) -> Piece:
        name = action.target

        def matches(r: Rule) -> bool:
            return r.matcher.match(name) and arguments_match(r.arguments, action.arguments)

        rule = find(self.rules, grants, "tool", context, now, matches)
        return piece_for(
            f"tool {name}",
            (),
            rule,
            name,
            "tool",
            self.defaults["tool"],
            "tools are used only where a rule allows",
        )

    # --- shared steps -----------------------------------------------------------------


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


def _sandbox_view(config: Any, home: str) -> Any:
    """What an isolating sandbox of this config shows, as a predicate; None for ``local``."""
    if config.sandbox.backend == "local":
        return None
    from pathlib import Path

    from .. import protected
    from ..protected import parse_mount

    mounts = [str(parse_mount(m).host) for m in config.sandbox.mounts]
    hidden = [str(p) for p in protected.protected_paths(config.sandbox.protected_paths, Path(home))]

    def shows(path: str, workspace: str) -> bool:
        return protected.visible_in_sandbox(
            path, [workspace, *mounts, *protected.SYSTEM_BINDS], hidden
        )

    return shows


def containment(config: Any) -> str:
    """What contains a command this configuration runs, in words that are true for it:
    the backend, what it can change, and whether a change to the workspace can be undone
    (``workspace.mode``: a changeset in ``auto``/``review``; ``direct`` writes at once)."""
    backend = config.sandbox.backend
    if backend == "local":
        return "sandbox.backend is local: nothing contains it, it runs as you on this machine"
    roots = " and files.write_roots" if config.files.write_roots else ""
    text = f"it runs in the {backend} sandbox, which can change files only in the workspace{roots}"
    mode = getattr(getattr(config, "workspace", None), "mode", "direct")
    if mode in ("auto", "review"):
        return text + "; a change to the workspace is held in a changeset and can be undone"
    return text + "; a change to the workspace is made at once and cannot be undone"
