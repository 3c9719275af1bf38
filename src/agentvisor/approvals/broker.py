"""The approval broker: turns a policy's ``ask`` into a final allow or deny.

    mode off      the ask becomes an allow (deny rules and the hardline floor still hold:
                  they never reach the broker as asks)
    mode smart    the judge may settle it (allow or deny); otherwise, as manual
    mode manual   a person answers through every available channel; the first answer wins

Nobody reachable (no channel available) → deny at once (``approvals.unattended: deny``).
No answer within ``approvals.timeout`` seconds → deny. Never an automatic approval.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..actions import Action, Context, Decision
from ..records import replace
from ..state.asks import Answer, ApprovalRequest
from .channel import Channel, Pending

# How long a "for this session" answer lasts (a grant bound to the session).
SESSION_GRANT_SECONDS = 12 * 3600


class ApprovalBroker:
    def __init__(
        self,
        config: Any,
        channels: Sequence[Channel] | None = None,
        judge: Any = None,
        grants: Any = None,
        sandboxed: bool | None = None,
        config_files: Sequence[str] | None = None,
        redact: Callable[[str], str] | None = None,
    ) -> None:
        """``channels``: defaults to the terminal. ``judge``: defaults from
        ``approvals.judge``. ``grants``: where "session" answers go (the state directory's
        grants file by default). ``config_files``: where "always" rules may be written.
        ``redact``: the gateway's redaction function; what a judge or a person is shown
        (the action, the reason and details) passes it first."""
        self.config = config
        self.approvals = config.approvals
        if channels is None:
            from .terminal import TerminalChannel

            channels = [TerminalChannel()]
        self.channels = list(channels)
        self.judge = judge if judge is not None else _default_judge(self.approvals)
        if grants is None:
            from ..state.grants import GrantStore

            grants = GrantStore(check_pattern=check_grant_pattern)
        self.grants = grants
        self.sandboxed = (config.sandbox.backend != "local") if sandboxed is None else sandboxed
        self.config_files = (
            tuple(config_files) if config_files is not None else _candidate_files(config)
        )
        self.redact = redact
        self._open: set[Ask] = set()  # asks waiting for a person, to withdraw at a stop
        self._lock = threading.Lock()

    def resolve(self, action: Action, context: Context, decision: Decision) -> Decision:
        """The final decision for ``decision``; only an ask can change. Blocks while a
        person is asked (front ends that must not block a thread use `open_ask`)."""
        settled = self.settle_without_person(action, context, decision)
        if settled is not None:
            return settled
        return self.ask_person(action, context, decision)

    def settle_without_person(
        self, action: Action, context: Context, decision: Decision
    ) -> Decision | None:
        """The final decision when no person is needed (not an ask, approvals off, or a
        smart judge decided); None when the ask goes to a person."""
        if decision.verdict != "ask":
            return decision
        mode = self.approvals.mode
        if mode == "off":
            return _settled(
                decision,
                "allow",
                f"approvals.mode is off: asks are allowed (was: {decision.reason})",
                "mode:off",
            )
        if mode == "smart" and self.judge is not None:
            shown_action, shown_decision = self._shown(action, decision)
            verdict = self.judge.judge(shown_action, context, shown_decision, self.sandboxed)
            if verdict is not None and verdict[0] in ("allow", "deny"):
                return _settled(
                    decision,
                    verdict[0],
                    f"{verdict[1]} (smart approval; was: {decision.reason})",
                    self.judge.name,
                )
        return None

    def ask_person(self, action: Action, context: Context, decision: Decision) -> Decision:
        ask = self.open_ask(action, context, decision)
        if isinstance(ask, Decision):
            return ask
        ask.wait()
        return ask.finish()

    def open_ask(self, action: Action, context: Context, decision: Decision) -> Ask | Decision:
        """Put the ask to every channel that can reach a person and return at once; the
        deny when none can."""
        channels = [c for c in self.channels if _available(c)]
        if not channels:
            return _settled(
                decision,
                "deny",
                "it needs a person's approval and no person "
                "can be reached (no terminal or approval channel; "
                f"approvals.unattended: {self.approvals.unattended}). "
                f"It needed approval because: {decision.reason}",
                "unattended",
            )
        request = ApprovalRequest(action, context, decision, self.config_files)
        # Channels show the redacted request (same id); an answer applies to the original,
        # whose patterns are what a grant or rule must match.
        shown_action, shown_decision = self._shown(action, decision)
        shown = replace(request, action=shown_action, decision=shown_decision)
        ask = Ask(self, request, shown, channels, self.approvals.timeout)
        with self._lock:
            self._open.add(ask)
        for channel in channels:
            try:
                channel.ask(shown, ask.pending.submit)
            except Exception:  # a broken channel must not stop the others
                continue
        return ask

    def withdraw_all(self, why: str) -> int:
        """Withdraw every ask still waiting (the gateway is stopping); how many."""
        with self._lock:
            asks = list(self._open)
        for ask in asks:
            ask.withdraw(why)
        return len(asks)

    def _closed(self, ask: Ask) -> None:
        with self._lock:
            self._open.discard(ask)

    def _shown(self, action: Action, decision: Decision) -> tuple[Action, Decision]:
        """The action and decision as a judge or a person sees them: secrets redacted."""
        r = self.redact
        if r is None:
            return action, decision
        argv = tuple(r(arg) for arg in action.argv) if action.argv is not None else None
        # A pattern holding a secret is not offered: the grant or rule would store it.
        patterns = decision.patterns
        if any(r(pattern) != pattern for pattern in patterns):
            patterns = ()
        return replace(action, target=r(action.target), argv=argv), replace(
            decision,
            reason=r(decision.reason),
            details=tuple(r(detail) for detail in decision.details),
            hint=r(decision.hint) if decision.hint else decision.hint,
            patterns=patterns,
        )

    def _apply(self, request: ApprovalRequest, answer: Answer) -> Decision:
        d = request.decision
        who = f"{answer.approver} via {answer.channel}"
        if answer.choice == "deny":
            why = f": {answer.reason}" if answer.reason else ""
            return _settled(d, "deny", f"denied by a person{why}", who)
        note = ""
        if answer.choice == "session" and request.context.session and d.patterns:
            for pattern in d.patterns:
                self.grants.add(
                    request.action.kind,
                    pattern,
                    request.context.session,
                    SESSION_GRANT_SECONDS,
                    f"approved for the session by {who}",
                    created_by=f"approval:{answer.channel}",
                )
            note = f"; allowed for session {request.context.session}"
        elif answer.choice == "always" and answer.config_file and d.patterns:
            from .rulefile import append_rules, rule_entries

            try:
                append_rules(answer.config_file, rule_entries(request))
                note = f"; an allow rule was added to {answer.config_file}"
            except Exception as exc:  # the approval itself still stands, once
                note = f"; the rule could not be saved ({exc}), so this is allowed once"
        return _settled(d, "allow", f"approved by a person ({answer.choice}){note}", who)


class Ask:
    """One ask put to people: it ends exactly once, answered, timed out or withdrawn.

    Waiting needs no thread of its own: `done` can be polled from an event loop (the MCP
    front end does, so a pending ask holds no worker), or `wait` blocks until it is.
    """

    def __init__(
        self,
        broker: ApprovalBroker,
        request: ApprovalRequest,
        shown: ApprovalRequest,
        channels: Sequence[Channel],
        timeout: float,
    ) -> None:
        self.broker, self.request, self.shown = broker, request, shown
        self.channels = list(channels)
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.pending = Pending()
        self.withdrawn: str | None = None

    def left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def where(self) -> str:
        """Where people can answer it, for the waiting agent."""
        return "; ".join(getattr(c, "where", c.name) for c in self.channels)

    def reachable(self) -> bool:
        """Can any of its channels still reach a person (e.g. a dashboard still served)?"""
        return any(_available(c) for c in self.channels)

    def done(self) -> bool:
        return self.withdrawn is not None or self.pending.answered() or self.left() == 0.0

    def wait(self) -> None:
        self.pending.wait(self.left())

    def finish(self) -> Decision:
        """Close the ask (no later answer counts), tell the channels, and decide."""
        self.pending.close()
        self.broker._closed(self)
        decision = self.request.decision
        if self.withdrawn is not None:  # the channels were told when it was withdrawn
            return _settled(
                decision,
                "deny",
                f"the ask was withdrawn: {self.withdrawn}. "
                f"It needed approval because: {decision.reason}",
                "withdrawn",
            )
        answer = self.pending.answer
        self._cancel(f"answered by {answer.channel}" if answer else "timed out")
        if answer is None:
            return _settled(
                decision,
                "deny",
                f"nobody answered at {self.where()} within "
                f"{self.timeout:g} s (approvals.timeout); no answer "
                f"counts as deny. It needed approval because: {decision.reason}",
                "timeout",
            )
        return self.broker._apply(self.request, answer)

    def withdraw(self, why: str) -> None:
        """Its caller is gone (cancelled, disconnected, session closed, gateway stopping):
        close it so that no answer can count, and tell the channels. Nothing runs."""
        with self.broker._lock:
            if self.withdrawn is not None or self not in self.broker._open:
                return  # already withdrawn or finished
            self.withdrawn = why
        self.pending.close()
        self.broker._closed(self)
        self._cancel(f"withdrawn: {why}")

    def _cancel(self, outcome: str) -> None:
        for channel in self.channels:
            try:
                channel.cancel(self.shown, outcome)
            except Exception:  # a broken channel must not stop the others
                continue


def _settled(decision: Decision, verdict: str, reason: str, approver: str) -> Decision:
    return replace(
        decision,
        verdict=verdict,
        reason=reason,
        approver=approver,
        hint=decision.hint if verdict == "deny" else None,
    )


def _available(channel: Channel) -> bool:
    try:
        return bool(channel.available())
    except Exception:
        return False


def check_grant_pattern(kind: str, pattern: str) -> None:
    """Raise ValueError unless ``pattern`` is a valid policy pattern of ``kind``: the
    ``check_pattern`` of a `GrantStore` (the state layer cannot import the policy)."""
    from ..policy.rules import compile_matcher

    compile_matcher(kind, pattern, os.path.expanduser("~"))


def _default_judge(approvals: Any) -> Any:
    from .judge import LLMJudge, RuleJudge

    if approvals.judge == "llm" and approvals.llm is not None:
        llm = approvals.llm
        return LLMJudge(llm.url, llm.model, llm.api_key_env, llm.timeout)
    return RuleJudge()


def _candidate_files(config: Any) -> tuple[str, ...]:
    from .. import paths

    files = [config.source] if config.source else []
    files += [os.path.abspath("agentvisor.yaml"), str(paths.user_config_file())]
    return tuple(dict.fromkeys(f for f in files if f))
