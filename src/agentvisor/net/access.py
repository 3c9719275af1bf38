"""Admission: the guard and the policy together decide whether one destination is reached.

Every network path (web tools, ``agentvisor fetch``, the egress proxy) asks
`NetworkAccess.admit` before it sends a byte. The order matters:

1. the guard reads the URL and refuses what no rule may allow (bad schemes,
   userinfo, cloud metadata);
2. the policy judges the ``fetch`` action *before* any DNS lookup, so a denied
   name is never even resolved (a lookup alone can carry data out);
3. the name is resolved once and every address classified; a destination that is
   internal (private, loopback, local names, ...) passes only if a rule allows that
   exact host and port (`allows_exact_host`), never through a wildcard or a default;
4. the caller connects to the addresses in the returned `Admission` and nowhere else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

from ..actions import Action, Context, Decision
from ..errors import NetworkBlocked, PolicyDenied
from ..records import Declared
from .guard import Guard, Resolved, Target, parse_hostport, parse_url

log = logging.getLogger("agentvisor.net")


class Policy(Protocol):
    """What admission needs from the policy engine (``agentvisor.policy.PolicyEngine``)."""

    def decide(self, action: Action, context: Context) -> Decision: ...

    def allows_exact_host(self, host: str, port: int, context: Context) -> Decision | None: ...


# Turns an ``ask`` into allow or deny (``ApprovalBroker.resolve``).
AskResolver = Callable[[Action, Context, Decision], Decision]
EventSink = Callable[[dict[str, Any]], None]


def deny_asks(action: Action, context: Context, decision: Decision) -> Decision:
    """With no approval channel nobody can answer, and silence means no."""
    return Decision(
        "deny",
        f"{decision.reason}; nobody is there to approve it",
        rule=decision.rule,
        hint=decision.hint,
    )


class Admission(Declared):
    """A destination that may be reached, the addresses that were checked, and why."""

    resolved: Resolved
    decision: Decision

    @property
    def target(self) -> Target:
        return self.resolved.target


class NetworkAccess:
    """The guard plus the policy; one instance serves every request of a session."""

    def __init__(
        self,
        policy: Policy,
        guard: Guard | None = None,
        resolve_ask: AskResolver | None = None,
        on_event: EventSink | None = None,
    ) -> None:
        self.policy = policy
        self.guard = guard or Guard()
        self._resolve_ask = resolve_ask or deny_asks
        self._on_event = on_event

    @classmethod
    def from_config(
        cls,
        config: Any,
        *,
        guard: Guard | None = None,
        resolve_ask: AskResolver | None = None,
        on_event: EventSink | None = None,
    ) -> NetworkAccess:
        """The real policy engine and approval broker for a loaded `Config`."""
        from ..policy import PolicyEngine

        policy = PolicyEngine.from_config(config)
        if resolve_ask is None:
            resolve_ask = _broker_for(config)
        if guard is None:
            guard = Guard(extra_blocked=config.network.block)
        return cls(policy, guard, resolve_ask, on_event)

    # -- admission ----------------------------------------------------------------------

    def admit_url(
        self,
        url: str,
        *,
        method: str = "GET",
        tool: str = "fetch",
        session: str | None = None,
        resolve: bool = True,
    ) -> Admission:
        return self.admit(
            parse_url(url), method=method, tool=tool, session=session, resolve=resolve
        )

    def admit_connect(
        self, hostport: str, *, tool: str = "proxy", session: str | None = None
    ) -> Admission:
        return self.admit(parse_hostport(hostport), method="CONNECT", tool=tool, session=session)

    def admit(
        self,
        target: Target,
        *,
        method: str,
        tool: str,
        session: str | None = None,
        resolve: bool = True,
    ) -> Admission:
        """Decide one destination; raises `NetworkBlocked` or `PolicyDenied` when refused.

        ``resolve=False`` skips the lookup for a caller that reuses a connection to the
        same host and port it was admitted for before (the proxy's keep-alive).
        """
        context = Context(tool=tool, session=session)
        shown = target.url if target.scheme in ("http", "https") else target.hostport
        try:
            self.guard.refuse_hardline(target)
            early = self.guard.pre_resolve_internal(target)
            if early:
                decision = self._exact(target, context, early)
            else:
                action_target = target.url if method != "CONNECT" else target.hostport
                decision = self._decide(Action("fetch", action_target, method=method), context)
            if not resolve:
                resolved = Resolved(target, ())
            else:
                resolved = self.guard.resolve(target)
                if resolved.internal and not early:
                    decision = self._exact(target, context, "; ".join(resolved.internal))
        except (NetworkBlocked, PolicyDenied) as exc:
            self._event(tool, session, method, shown, "deny", _rule_of(exc), str(exc))
            raise
        self._event(tool, session, method, shown, "allow", decision.rule, decision.reason)
        return Admission(resolved, decision)

    def preview(
        self,
        url: str,
        *,
        method: str = "GET",
        tool: str = "fetch",
        session: str | None = None,
        resolve: bool = False,
    ) -> Decision:
        """What a fetch of ``url`` would meet, without asking anyone or connecting: the
        guard's refusal as a deny, an internal destination without an exact rule as a
        deny, else the policy's own decision (``ask`` stays ``ask``). For ``agentvisor
        check fetch``, so that it and ``agentvisor fetch`` agree. ``resolve`` also looks
        the name up, to see whether it leads somewhere internal."""
        context = Context(tool=tool, session=session)
        try:
            target = parse_url(url)
            self.guard.refuse_hardline(target)
            early = self.guard.pre_resolve_internal(target)
            if early:
                return self._exact(target, context, early)
            decision = self.policy.decide(Action("fetch", target.url, method=method), context)
            if resolve and decision.verdict != "deny":
                resolved = self.guard.resolve(target)
                if resolved.internal:
                    return self._exact(target, context, "; ".join(resolved.internal))
            return decision
        except NetworkBlocked as exc:
            return Decision(
                "deny",
                str(exc),
                rule=exc.rule or "guard",
                hint="only a rule that allows the exact host and port opens an "
                "internal destination; metadata endpoints never open"
                if exc.rule == "guard:internal"
                else None,
            )

    def secret_use(
        self, name: str, host: str, *, tool: str, session: str | None = None
    ) -> Decision:
        """The policy's word on sending secret ``name`` to ``host`` (asks resolved)."""
        context = Context(tool=tool, session=session)
        return self._settle(Action("secret", name, host=host), context)

    def _decide(self, action: Action, context: Context) -> Decision:
        decision = self._settle(action, context)
        if not decision.allowed:
            hint = f" ({decision.hint})" if decision.hint else ""
            raise PolicyDenied(
                f"refused {action.method} {action.target}: {decision.reason}{hint}", decision
            )
        return decision

    def _settle(self, action: Action, context: Context) -> Decision:
        decision = self.policy.decide(action, context)
        if decision.verdict == "ask":
            decision = self._resolve_ask(action, context, decision)
        return decision

    def _exact(self, target: Target, context: Context, why: str) -> Decision:
        decision = self.policy.allows_exact_host(target.host, target.port, context)
        if decision is not None and decision.allowed:
            return decision
        raise NetworkBlocked(
            f"refused {target.hostport}: internal destination ({why}); only a rule that "
            f"allows this exact host and port can open it, e.g. a fetch rule for "
            f"{target.hostport}",
            destination=target.hostport,
            rule="guard:internal",
        )

    def _event(
        self,
        tool: str,
        session: str | None,
        method: str,
        destination: str,
        verdict: str,
        rule: str | None,
        reason: str,
    ) -> None:
        event = {
            "kind": "fetch",
            "tool": tool,
            "session": session,
            "method": method,
            "destination": destination,
            "decision": verdict,
            "rule": rule,
            "reason": reason,
        }
        log.info("%s %s %s: %s (%s)", tool, method, destination, verdict, rule)
        if self._on_event is not None:
            self._on_event(event)


def _rule_of(exc: Exception) -> str | None:
    if isinstance(exc, NetworkBlocked):
        return exc.rule
    decision = getattr(exc, "decision", None)
    return getattr(decision, "rule", None)


def _broker_for(config: Any) -> AskResolver:
    from ..approvals import ApprovalBroker

    return ApprovalBroker(config).resolve
