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
from contextvars import ContextVar
from typing import Any, Protocol

from ..actions import SEVERITY, Action, Context, Decision
from ..errors import NetworkBlocked, PolicyDenied
from ..records import Declared, replace
from .guard import Guard, Resolved, Target, embedded_ipv4s, parse_hostport, parse_url

log = logging.getLogger("agentvisor.net")


class Policy(Protocol):
    """What admission needs from the policy engine (``agentvisor.policy.PolicyEngine``)."""

    def decide(self, action: Action, context: Context) -> Decision: ...

    def allows_exact_host(self, host: str, port: int, context: Context) -> Decision | None: ...


# Turns an ``ask`` into allow or deny (``ApprovalBroker.resolve``).
AskResolver = Callable[[Action, Context, Decision], Decision]
EventSink = Callable[[dict[str, Any]], None]


def _never() -> bool:
    return False


# Whether the caller a request is made for has gone away. A path that serves a caller on
# a connection (the egress proxy) sets it around admission; an ask resolver that waits
# for a person (the gateway's) withdraws the ask as soon as it says so.
caller_gone: ContextVar[Callable[[], bool]] = ContextVar("caller_gone", default=_never)


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


class Verdict(Declared):
    """`NetworkAccess.judge`'s answer: the decision, the addresses it checked (None when
    refused before a lookup) and, when refused, the exception a fetch raises."""

    decision: Decision
    resolved: Resolved | None = None
    refusal: NetworkBlocked | PolicyDenied | None = None


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
        verdict = self.judge(
            target, method=method, tool=tool, session=session, resolve=resolve, settle=True
        )
        decision = verdict.decision
        self._event(tool, session, method, _shown(target), decision)
        if verdict.refusal is not None:
            raise verdict.refusal
        return Admission(verdict.resolved or Resolved(target, ()), decision)

    def preview(
        self,
        destination: str,
        *,
        method: str = "GET",
        tool: str = "fetch",
        session: str | None = None,
        resolve: bool = False,
    ) -> Decision:
        """What a fetch of ``destination`` (a URL, or ``host:port`` as CONNECT) would meet,
        without asking anyone or connecting: `judge` with asks left as asks. For ``agentvisor
        check fetch``, so that it and ``agentvisor fetch`` answer alike. ``resolve`` also
        looks the name up (when the policy does not deny it), as the fetch would."""
        try:
            target = parse_destination(destination)
        except NetworkBlocked as exc:
            return _refusal_decision(exc)
        if "://" not in destination:
            method = "CONNECT"
        return self.judge(
            target, method=method, tool=tool, session=session, resolve=resolve, settle=False
        ).decision

    def judge(
        self,
        target: Target,
        *,
        method: str,
        tool: str,
        session: str | None,
        resolve: bool,
        settle: bool,
    ) -> Verdict:
        """The one decision on a destination, for the real fetch and for ``check`` alike.

        ``settle`` sends an ``ask`` to the approval channel (a fetch) or leaves it as it is
        (a preview). A refusal comes back as a deny `Decision` plus the exception a fetch
        raises; cloud metadata is a deny with ``hardline`` set.
        """
        context = Context(tool=tool, session=session)
        try:
            self.guard.refuse_hardline(target)
            early = self.guard.pre_resolve_internal(target)
            if early:
                decision = self._exact(target, context, early)
            else:
                decision = self._policy(target, method, context, settle)
                # A fetch goes on only on allow (an ask left unsettled fails closed).
                if decision.verdict == "deny" or (settle and not decision.allowed):
                    return Verdict(decision, refusal=_policy_refusal(target, method, decision))
            if not resolve:
                return Verdict(decision, Resolved(target, ()))
            resolved = self.guard.resolve(target)
            if resolved.internal and not early:
                decision = self._exact(target, context, "; ".join(resolved.internal))
            return Verdict(decision, resolved)
        except NetworkBlocked as exc:
            return Verdict(_refusal_decision(exc), refusal=exc)

    def record(self, event: dict[str, Any]) -> None:
        """Pass an event about a request (its outcome, say) to the audit hook."""
        if self._on_event is not None:
            self._on_event(event)

    def secret_use(
        self, name: str, host: str, *, tool: str, session: str | None = None
    ) -> Decision:
        """The policy's word on sending secret ``name`` to ``host`` (asks resolved)."""
        context = Context(tool=tool, session=session)
        return self._settle(Action("secret", name, host=host), context)

    def _policy(self, target: Target, method: str, context: Context, settle: bool) -> Decision:
        """The policy's word on the destination as written and, for an IPv6 literal that
        embeds IPv4 addresses, on each of those too (the strictest wins), so a rule about
        ``10.1.2.3`` also holds for ``[::ffff:10.1.2.3]``."""
        spellings = [target] + [
            replace(target, host=str(ip4), ip=ip4)
            for ip4 in (embedded_ipv4s(target.ip) if target.ip is not None else ())
        ]
        judged = [
            (action, self.policy.decide(action, context))
            for action in (_fetch_action(t, method) for t in spellings)
        ]
        action, decision = max(judged, key=lambda pair: SEVERITY[pair[1].verdict])
        if settle and decision.verdict == "ask":
            decision = self._resolve_ask(action, context, decision)
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
        self, tool: str, session: str | None, method: str, destination: str, decision: Decision
    ) -> None:
        event = {
            "kind": "fetch",
            "tool": tool,
            "session": session,
            "method": method,
            "destination": destination,
            "decision": decision.verdict,
            "rule": decision.rule,
            "reason": decision.reason,
            "hardline": decision.hardline,
        }
        log.info("%s %s %s: %s (%s)", tool, method, destination, decision.verdict, decision.rule)
        if self._on_event is not None:
            self._on_event(event)


def parse_destination(text: str) -> Target:
    """A URL, or ``host:port`` as a CONNECT names it."""
    return parse_url(text) if "://" in text else parse_hostport(text)


def _shown(target: Target) -> str:
    return target.url if target.scheme in ("http", "https") else target.hostport


def _fetch_action(target: Target, method: str) -> Action:
    return Action("fetch", target.hostport if method == "CONNECT" else target.url, method=method)


def _policy_refusal(target: Target, method: str, decision: Decision) -> PolicyDenied:
    hint = f" ({decision.hint})" if decision.hint else ""
    return PolicyDenied(f"refused {method} {_shown(target)}: {decision.reason}{hint}", decision)


def _refusal_decision(exc: NetworkBlocked) -> Decision:
    """The guard's refusal as a decision, worded as the fetch words it."""
    rule = exc.rule or "guard"
    hardline = rule == "guard:metadata"
    if hardline:
        hint = (
            "cloud metadata endpoints are on the hardline floor: no rule, grant or approval "
            "opens them"
        )
    elif rule == "guard:internal":
        hint = (
            "only an allow rule or grant naming this exact host and port opens an internal "
            "destination (no wildcard, no default, no approval)"
        )
    else:
        hint = None
    return Decision("deny", str(exc), rule=rule, hardline=hardline, hint=hint)


def _broker_for(config: Any) -> AskResolver:
    from ..approvals import ApprovalBroker

    return ApprovalBroker(config).resolve
