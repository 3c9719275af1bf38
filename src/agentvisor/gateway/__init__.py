"""The gateway: one pipeline for every tool call, whatever front end it came from.

    Gateway.call(session, tool, arguments)
      1. the tool must be in the session's toolsets; arguments must match its schema
      2. the tool turns the arguments into actions (exec / read / write / tool ...)
      3. the policy engine decides each action; an ``ask`` goes to the approval broker
      4. the first refusal ends the call with a message: what, why, how to allow it;
         then the session's flow guard (flow.py) judges where the call's values came from
      5. write-ahead: an ``intent`` event (session, tool, redacted arguments, decision) is
         committed; if it cannot be, the call is refused and nothing runs
      6. the tool runs (in the session's sandbox, or on the host's guarded network)
      7. the session's changeset is settled (changes/): ordinary edits applied, the
         host-run class held for a person; the result is shaped: terminal escapes
         stripped, secrets redacted, output capped
      8. a ``call`` event records the outcome (``ref`` names the intent's call id); a
         call refused before running has this event only

The MCP server, the CLI and the Python API are thin shells over `Gateway`; none of them
decides anything.
"""

from __future__ import annotations

import logging
import math
import os
import re
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import anyio

from ..actions import Action, Context, Decision
from ..config import Config
from ..errors import AgentvisorError, QuotaExceeded
from ..fileguard import GuardRefused
from ..net.access import caller_gone
from ..policy.verdicts import with_refusal_id
from ..records import replace
from ..sandbox import Sandbox
from ..state.events import AuditEvent, AuditLog
from ..state.scopes import ScopeStore
from . import heap
from .asks import Gone, OpenAsks, Progress, wait_for, wait_in_thread
from .flow import FlowGuard, flow_action
from .results import ToolOutput, refusal, shape
from .session import Session
from .tools import ToolSpec, builtin_tools

if TYPE_CHECKING:
    from ..approvals.broker import Ask
    from ..changes import Changesets, Settlement

__all__ = ["Gateway", "Session", "ToolOutput", "ToolSource"]

log = logging.getLogger("agentvisor.gateway")

# Tools made from the gateway itself, e.g. `agentvisor.wasm.gateway.tool_specs`: Wasm tools
# send their network requests through its policy, broker and audit log. The front ends
# pass them in, so this layer never imports the Wasm runtime above it.
ToolSource: TypeAlias = Callable[["Gateway"], Sequence[ToolSpec]]

# Judging a call: yields each ask, is sent its final decision, returns the decision and
# the refusal (None when every action is allowed).
Judging: TypeAlias = Generator[
    tuple[Action, Context, Decision], Decision, tuple[Decision, ToolOutput | None]
]


class Gateway:
    def __init__(
        self,
        config: Config,
        *,
        workspace: str | os.PathLike[str] | None = None,
        audit: AuditLog | None = None,
        broker: Any = None,
        extra_tools: Sequence[ToolSpec] | ToolSource = (),
        sandbox: Sandbox | None = None,
    ) -> None:
        """``sandbox``: where commands run (default: the configured backend; tests of the
        pipeline pass one with `sandbox.fake.FakeBackend`)."""
        from ..approvals import ApprovalBroker, TerminalChannel, check_grant_pattern
        from ..policy import PolicyEngine
        from ..state import State

        self.config = config
        self.workspace = Path(
            os.path.realpath(workspace or config.sandbox.workspace or os.getcwd())
        )
        self.sandbox = sandbox or Sandbox(
            config, workspace=self.workspace, workspace_quota=has_changesets(config)
        )
        self.changesets = _changesets(config, self.workspace, self.sandbox)
        self._redactor = self._make_redactor()
        # Audit log, grants and the shared approval queue (audit.url / state.url); every
        # text they store passes `redact`.
        self.state = State.from_config(
            config, check_pattern=check_grant_pattern, redact=self.redact
        )
        self.state.start()
        # Where an ask goes: this gateway's terminal, its own dashboard and webhook, and
        # the people of other gateways only when the state database is shared on purpose
        # (state.url or audit.url set), never through the per-user default file.
        shared = bool(config.state.url or config.audit.url)
        self.queue_channel = self.state.channel(config.approvals.timeout, shared=shared)
        self.policy = PolicyEngine.from_config(config, grants=self.state.grants)
        self.broker = (
            broker
            if broker is not None
            else ApprovalBroker(
                config,
                channels=[TerminalChannel(), self.queue_channel],
                grants=self.state.grants,
                redact=self.redact,
            )
        )
        self.audit: AuditLog = audit if audit is not None else self.state.audit
        # Tool name prefix -> why those tools are not offered (a Wasm tool the lock file
        # refused): an agent calling one is told why, not just that it does not exist.
        self.unavailable: dict[str, str] = {}
        extra = extra_tools(self) if callable(extra_tools) else extra_tools
        self.tools = [*builtin_tools(), *extra]
        self.sessions: dict[str, Session] = {}
        self.flow = FlowGuard.from_config(config.flow, scopes=ScopeStore.default())
        self.asks = OpenAsks(
            config.approvals.max_pending_per_session, config.approvals.max_pending_per_client
        )
        self._running: Counter[str] = Counter()  # calls in progress per client
        self._closed = 0  # sessions closed since the reaper last gave memory back
        # Tools run in threads of their own, not from the event loop's shared pool: a
        # command can wait minutes (for its network ask, say) and must not starve the
        # short steps of other sessions' calls. Bounded by the client quota of calls.
        self._run_threads = anyio.CapacityLimiter(math.inf)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reaper = threading.Thread(
            target=self._reap_idle, daemon=True, name="agentvisor-idle-reaper"
        )
        self._reaper.start()

    # -- sessions -----------------------------------------------------------------------

    def open_session(
        self,
        *,
        agent: str | None = None,
        toolsets: Sequence[str] | None = None,
        session_id: str | None = None,
        client: str = "local",
    ) -> Session:
        """``client``: who connected (the front end's word: a token's fingerprint, an
        address); the caps on pending asks and the quotas count per client."""
        session = Session(
            self, agent=agent, toolsets=toolsets or self.config.toolsets, session_id=session_id
        )
        session.client = client
        quota = self.config.gateway.max_sessions_per_client
        with self._lock:  # counted and added at once: concurrent opens cannot overshoot
            held = sum(1 for s in self.sessions.values() if s.client == client)
            if held < quota:
                self.sessions[session.id] = session
        if held >= quota:  # rule gateway:quota
            session.close()
            raise QuotaExceeded(
                f"client {client} already has {held} sessions open (the client quota is "
                f"{quota} at once: gateway.max_sessions_per_client); close one, or idle ones "
                f"end after sandbox.idle_timeout ({self.config.sandbox.idle_timeout:g} s)"
            )
        self.lifecycle(session, f"session opened with toolsets {','.join(session.toolsets)}")
        return session

    def close_session(self, session: Session) -> None:
        """End the session and everything it holds: its asks, sandbox, changeset, flow
        state. Once: the front end, the idle reaper and a stop may each try."""
        with self._lock:
            if self.sessions.pop(session.id, None) is None:
                return
            self._closed += 1
        self.flow.forget(session)
        self.asks.withdraw("the session closed", session.id)
        self._record_all(self._settle(session)[1])  # what background jobs wrote last
        session.close()
        if self.changesets is not None and session.changeset is not None:
            self.changesets.finish(session.changeset)
        self.lifecycle(session, "session closed")

    def refused_call(self, tool: str, arguments: dict[str, Any], why: str, rule: str) -> None:
        """Audit a call refused before it had a session (a front end could not open one,
        e.g. over the client's session quota): every call is an audit event."""
        self.audit.record(
            AuditEvent(
                kind="call",
                tool=tool,
                arguments=arguments,
                decision="deny",
                rule=rule,
                reason=why,
                result=f"error: refused: {why}"[:500],
            )
        )

    def stopping(self) -> int:
        """Deny every pending ask as "the gateway is stopping" (each is withdrawn, so its
        call ends at once and a later answer runs nothing); how many there were."""
        denied = int(self.broker.withdraw_all("the gateway is stopping"))
        self.asks.withdraw("the gateway is stopping")  # and those being opened now
        return denied

    def close(self) -> None:
        self._stop.set()
        self.stopping()
        for session in list(self.sessions.values()):
            self.close_session(session)

    # -- the pipeline -------------------------------------------------------------------

    def call(self, session: Session, tool: str, arguments: dict[str, Any] | None) -> ToolOutput:
        """One call, start to end, in this thread (the Python API): an ask waits for a
        person in it, capped and withdrawn on session close or stop like every ask; it
        is the caller's own thread, so it holds nobody else's. An event loop awaits
        `call_async` instead."""
        with session.in_call():
            return self._call(session, tool, dict(arguments or {}), time.monotonic())

    def _call(
        self, session: Session, tool: str, arguments: dict[str, Any], started: float
    ) -> ToolOutput:
        spec, output = self._admit(session, tool, arguments)
        decision: Decision | None = None
        call_id: str | None = None
        if spec is not None:
            steps = self._judge(session, spec, arguments)
            try:
                ask, result = _step(steps, None)
                while ask is not None:
                    answer = self.resolve_in_thread(
                        *ask, session=session.id, client=session.client, gone=caller_gone.get()
                    )
                    ask, result = _step(steps, answer)
                decision, output = result
            except Exception as exc:  # rule gateway:judge-failed: what cannot be judged never runs
                decision, output = _judge_failed(spec.name, exc)
            if output is None:
                output, call_id, decision = self._run_recorded(session, spec, arguments, decision)
        assert output is not None  # refused by _admit, or judged and refused or run above
        return self._conclude(session, tool, arguments, output, decision, call_id, started)

    async def call_async(
        self,
        session: Session,
        tool: str,
        arguments: dict[str, Any] | None,
        progress: Progress | None = None,
    ) -> ToolOutput:
        """`call` for an event loop: the blocking steps run in worker threads, and an ask
        waits in the loop, holding none (`gateway.asks`). Cancelling the caller withdraws
        its ask; nothing runs after that."""
        with session.in_call():
            return await self._call_counted(
                session, tool, dict(arguments or {}), progress, time.monotonic()
            )

    async def _call_counted(
        self,
        session: Session,
        tool: str,
        arguments: dict[str, Any],
        progress: Progress | None,
        started: float,
    ) -> ToolOutput:
        """The call within the client's quota of running calls (rule gateway:quota)."""
        limit = self.config.gateway.max_calls_per_client
        with self._lock:
            running = self._running[session.client]
            if running < limit:
                self._running[session.client] += 1
        if running >= limit:  # rule gateway:quota
            refused = ToolOutput(
                f"{tool}: refused: client {session.client} already has {running} calls "
                f"running (the client quota is {limit} at once: "
                "gateway.max_calls_per_client); wait for one to finish",
                is_error=True,
            )
            quota = Decision("deny", "over the client's quota of running calls", "gateway:quota")
            return await anyio.to_thread.run_sync(
                self._conclude, session, tool, arguments, refused, quota, None, started
            )
        try:
            return await self._call_async(session, tool, arguments, progress, started)
        finally:
            with self._lock:
                self._running[session.client] -= 1
                if not self._running[session.client]:  # no entry per client ever seen
                    del self._running[session.client]

    async def _call_async(
        self,
        session: Session,
        tool: str,
        arguments: dict[str, Any],
        progress: Progress | None,
        started: float,
    ) -> ToolOutput:
        spec, output = await anyio.to_thread.run_sync(self._admit, session, tool, arguments)
        decision: Decision | None = None
        call_id: str | None = None
        if spec is not None:
            steps = self._judge(session, spec, arguments)
            try:
                ask, result = await anyio.to_thread.run_sync(_step, steps, None)
                while ask is not None:
                    answer = await self._resolve_async(session, *ask, progress)
                    ask, result = await anyio.to_thread.run_sync(_step, steps, answer)
                decision, output = result
            except anyio.get_cancelled_exc_class():
                raise
            except Exception as exc:  # rule gateway:judge-failed: what cannot be judged never runs
                decision, output = _judge_failed(spec.name, exc)
            if output is None:
                output, call_id, decision = await self._run_bound(
                    session, spec, arguments, decision
                )
        assert output is not None  # refused by _admit, or judged and refused or run above
        return await anyio.to_thread.run_sync(
            self._conclude, session, tool, arguments, output, decision, call_id, started
        )

    async def _run_bound(
        self, session: Session, spec: ToolSpec, arguments: dict[str, Any], decision: Decision
    ) -> tuple[ToolOutput, str | None, Decision]:
        """`_run_recorded` in a thread of its own, bound to its caller: when the caller
        cancels or disconnects meanwhile, an ask the run waits on (a web tool's
        destination) is withdrawn, so the run ends at once and nothing more is sent."""
        gone = threading.Event()
        done = anyio.Event()
        ran: list[tuple[ToolOutput, str | None, Decision]] = []
        failed: list[Exception] = []  # raised as it is, not in the task group's wrapping

        async def run() -> None:
            try:
                ran.append(
                    await anyio.to_thread.run_sync(
                        self._run_recorded,
                        session,
                        spec,
                        arguments,
                        decision,
                        limiter=self._run_threads,
                    )
                )
            except Exception as exc:
                failed.append(exc)
            finally:
                done.set()

        async with anyio.create_task_group() as tg:
            bound = caller_gone.set(gone.is_set)  # run's context, and its thread's, copy it
            tg.start_soon(run)
            caller_gone.reset(bound)
            try:
                await done.wait()
            except anyio.get_cancelled_exc_class():
                gone.set()
                raise
        if failed:
            raise failed[0]
        return ran[0]

    async def _resolve_async(
        self,
        session: Session,
        action: Action,
        context: Context,
        decision: Decision,
        progress: Progress | None,
    ) -> Decision:
        broker = self.broker
        settled = await anyio.to_thread.run_sync(
            broker.settle_without_person, action, context, decision
        )
        if settled is not None:
            return settled
        place = self.asks.reserve(session.id, session.client)
        if isinstance(place, str):
            return _over_ask_limit(decision, place)
        with place:
            ask = await anyio.to_thread.run_sync(broker.open_ask, action, context, decision)
            if isinstance(ask, Decision):
                return ask
            place.opened(ask)
            try:
                await wait_for(ask, progress)
            except anyio.get_cancelled_exc_class():
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(
                        ask.withdraw, "the client cancelled the request or disconnected"
                    )
                raise
        if ask.withdrawn is not None:
            return _withdrawn(ask, decision)
        return await anyio.to_thread.run_sync(ask.finish)

    def resolve_in_thread(
        self,
        action: Action,
        context: Context,
        decision: Decision,
        *,
        session: str,
        client: str,
        gone: Gone,
    ) -> Decision:
        """An ask raised outside the MCP pipeline, waited for in the caller's own thread
        (a proxy connection's, a running call's, an exec client's): capped per session and
        client like every ask, and withdrawn when ``gone()`` says the caller went away,
        the session closes or the gateway stops."""
        settled = self.broker.settle_without_person(action, context, decision)
        if settled is not None:
            return settled
        place = self.asks.reserve(session, client)
        if isinstance(place, str):
            return _over_ask_limit(decision, place)
        with place:
            ask = self.broker.open_ask(action, context, decision)
            if isinstance(ask, Decision):
                return ask
            place.opened(ask)
            wait_in_thread(ask, gone)
        if ask.withdrawn is not None:
            return _withdrawn(ask, decision)
        return ask.finish()

    def _admit(
        self, session: Session, tool: str, arguments: dict[str, Any]
    ) -> tuple[ToolSpec | None, ToolOutput | None]:
        """The tool, or why the call is refused before anything is judged."""
        spec = session.tools.get(tool)
        refused = next((why for p, why in self.unavailable.items() if tool.startswith(p)), None)
        if spec is None and refused is not None:
            return None, ToolOutput(f"the tool {tool!r} is not offered: {refused}", is_error=True)
        if spec is None:
            return None, ToolOutput(
                f"the tool {tool!r} is not available in this session (toolsets: "
                f"{', '.join(session.toolsets)}; tools: "
                f"{', '.join(sorted(session.tools))})",
                is_error=True,
            )
        if (problem := _check_arguments(spec, arguments)) is not None:
            return None, ToolOutput(f"{tool}: invalid arguments: {problem}", is_error=True)
        return spec, None

    def _judge(self, session: Session, spec: ToolSpec, arguments: dict[str, Any]) -> Judging:
        """The decision on the call's actions and the refusal if one refused. Each ask is
        yielded as (action, context, decision) and its final decision sent back, so the
        caller chooses how to wait for a person."""
        context = session.context(spec.name)
        # Tools with no action of their own (process on the session's own jobs; web tools,
        # which the network layer judges per destination) pass straight to running.
        decision = Decision("allow", "the call itself touches no resource")
        for action in spec.actions(session, arguments):
            decision = _nul_byte(action) or self.policy.decide(action, context)
            if decision.verdict == "ask":
                decision = yield action, context, decision
            if not decision.allowed:
                return decision, self._refuse(session, spec, action, decision)
        asked = self.flow.check(session, spec, arguments)
        if asked is not None:
            action, flowed = flow_action(spec, arguments), asked
            if flowed.verdict == "ask":
                flowed = yield action, context, flowed
            if not flowed.allowed:
                return flowed, self._refuse(session, spec, action, flowed)
            self.flow.approved(session, arguments, asked)
            decision = flowed
        return decision, None

    def _refuse(
        self, session: Session, spec: ToolSpec, action: Action, decision: Decision
    ) -> ToolOutput:
        """The refusal the agent reads. One a grant could lift is recorded under an id
        (`agentvisor grant --ask ID`), which its hint names and its call event keeps."""
        recorded = None
        if decision.patterns and not decision.hardline:
            try:
                recorded = self.state.refusals.record(
                    action.kind,
                    action.target,
                    decision.patterns,
                    decision.reason,
                    decision.rule,
                    session.id,
                    session.agent,
                    spec.name,
                )
            except Exception as exc:  # the refusal stands; only its grant by id is lost
                log.warning("the refusal of %s could not be recorded: %s", spec.name, exc)
        if recorded is None:
            return refusal(action, decision)
        output = refusal(action, with_refusal_id(decision, recorded.id))
        output.data["refusal_id"] = recorded.id
        return output

    def _run_recorded(
        self, session: Session, spec: ToolSpec, arguments: dict[str, Any], decision: Decision
    ) -> tuple[ToolOutput, str | None, Decision]:
        """Write-ahead: the intent is committed, then the tool runs; if the intent cannot
        be committed nothing runs. The decision comes back as the outcome records it: the
        file guard's refusal replaces the policy's allow."""
        intent = _call_event("intent", session, spec.name, arguments, decision)
        intent.ref, intent.result = f"c-{secrets.token_hex(6)}", "started"
        try:
            self.audit.record(intent)
        except Exception as exc:  # rule: nothing runs that the audit log has not recorded
            log.error("refusing %s: its intent could not be recorded: %s", spec.name, exc)
            return _unrecorded(spec.name, exc), None, decision
        try:
            output = spec.run(session, arguments)
        except GuardRefused as exc:
            # The policy allowed it, the file guard did not (a path leading out of the
            # roots, a protected file): a refusal, in the answer and in the audit log.
            refused = Decision("deny", str(exc), rule="fileguard")
            return ToolOutput(str(exc), is_error=True, data={"refused": True}), intent.ref, refused
        except AgentvisorError as exc:
            return ToolOutput(str(exc), is_error=True), intent.ref, decision
        except Exception as exc:  # not agentvisor's own: a tool error, no host path or stack
            return _failed(spec.name, exc), intent.ref, decision
        self.flow.record(session, spec, arguments, output.text)
        return output, intent.ref, decision

    def _conclude(
        self,
        session: Session,
        tool: str,
        arguments: dict[str, Any],
        output: ToolOutput,
        decision: Decision | None,
        call_id: str | None,
        started: float,
    ) -> ToolOutput:
        """Settle the session's changeset (when the tool ran), shape the output and record
        the outcome with what the settling applied or held."""
        changes: list[AuditEvent] = []
        if call_id is not None:
            settlement, changes = self._settle(session)
            output = _with_note(output, settlement)
        output = shape(output, self.config.gateway.max_output_bytes, self.redact)
        outcome = _call_event("call", session, tool, arguments, decision)
        outcome.decision = decision.verdict if decision else ("error" if output.is_error else None)
        # A refused call has no call id; a grantable one keeps its refusal's id.
        outcome.ref = call_id or output.data.get("refusal_id")
        outcome.result = _summary(output)
        outcome.duration = time.monotonic() - started
        try:
            self._record_all([outcome, *changes])
        except Exception:  # the tool has run; its intent stays in the log without an outcome
            log.exception("the outcome of %s call %s could not be recorded", tool, call_id)
        return output

    def decide(self, action: Action, context: Context) -> Decision:
        decision = self.policy.decide(action, context)
        if decision.verdict == "ask":
            decision = self.broker.resolve(action, context, decision)
        return decision

    def _settle(self, session: Session) -> tuple[Settlement | None, list[AuditEvent]]:
        """Apply or hold what the call changed in the session's changeset; the events
        that record it (the caller records them with the call's own, in one commit)."""
        if self.changesets is None or session.changeset is None:
            return None, []
        from ..changes.settling import settle_recorded

        return settle_recorded(self.changesets, session.changeset, session.write_policy())

    def _record_all(self, events: list[AuditEvent]) -> None:
        record_many = getattr(self.audit, "record_many", None)
        if record_many is not None:
            record_many(events)
            return
        for event in events:
            self.audit.record(event)

    # The network layer calls back for asks and events of the web tools and of the
    # egress proxy in front of the sessions' sandboxes.
    def resolve_ask(self, action: Action, context: Context, decision: Decision) -> Decision:
        """A network ask of a session (`resolve_in_thread`, withdrawn when the proxy
        client that raised it disconnects). One that is not a session's (an upstream
        server's own proxy, ``upstream:NAME``) is capped under that name, as the client
        ``gateway``."""
        session = self.sessions.get(context.session or "")
        if session is None:
            owner, client = context.session or "gateway", "gateway"
        else:
            owner, client, context = session.id, session.client, session.context(context.tool)
        return self.resolve_in_thread(
            action, context, decision, session=owner, client=client, gone=caller_gone.get()
        )

    def network_event(self, event: dict[str, Any]) -> None:
        self.audit.record(
            AuditEvent(
                kind="network",
                session=event.get("session"),
                tool=event.get("tool"),
                decision=event.get("decision"),
                rule=event.get("rule"),
                reason=event.get("reason"),
                result=str(event.get("destination") or "")[:500],
            )
        )

    # -- helpers ------------------------------------------------------------------------

    def redact(self, text: str) -> str:
        """The one redaction function: every text that reaches the agent (tool output,
        refusals, errors), the state database (audit events, the approvals table, which
        the dashboard and webhook show) or a person (approval prompts) passes here."""
        return self._redactor.text(text) if self._redactor else text

    def _make_redactor(self) -> Any:
        if not self.config.secrets:
            return None
        from ..net.secrets import SecretStore

        return SecretStore.from_config(self.config).redactor()

    def lifecycle(self, session: Session, what: str) -> None:
        self.audit.record(
            AuditEvent(kind="sandbox", session=session.id, agent=session.agent, result=what)
        )

    def _reap_idle(self) -> None:
        """Stop the sandboxes of idle sessions (sandbox.idle_stop) and close sessions idle
        past sandbox.idle_timeout: a client that went away without a word gives back its
        processes soon and all the rest later."""
        sandbox = self.config.sandbox
        tick = min(30.0, sandbox.idle_stop / 4, sandbox.idle_timeout / 4)
        while not self._stop.wait(tick):
            for session in list(self.sessions.values()):
                try:
                    self._reap(session)
                except Exception:  # one session's failure must not end reclaiming the rest
                    log.exception("reclaiming idle session %s failed", session.id)
            with self._lock:
                closed, self._closed = self._closed, 0
            if closed:
                heap.give_back()

    def _reap(self, session: Session) -> None:
        sandbox = self.config.sandbox
        if session.busy:
            return
        if time.monotonic() - session.last_used > sandbox.idle_timeout:
            self.lifecycle(session, f"idle for {sandbox.idle_timeout:g} s (sandbox.idle_timeout)")
            self.close_session(session)
        elif session.stop_idle_sandbox(sandbox.idle_stop):
            self.lifecycle(
                session, f"sandbox stopped: idle for {sandbox.idle_stop:g} s (sandbox.idle_stop)"
            )


def has_changesets(config: Config) -> bool:
    """Whether the configured sandbox sends every write to the workspace through a
    session changeset (see `_changesets`)."""
    sandbox = config.sandbox
    return config.workspace.mode != "direct" and sandbox.backend == "bwrap" and sandbox.persistent


def _changesets(config: Config, workspace: Path, sandbox: Sandbox) -> Changesets | None:
    """The workspace's changesets, unless ``workspace.mode`` is direct. A session's
    overlay is mounted by the persistent bwrap sandbox's mount step; other backends
    cannot offer it yet (`for_sandbox` refuses or warns)."""
    from ..changes.settling import for_sandbox

    backend = sandbox.backend
    unavailable = None
    if backend.name != "bwrap" or not config.sandbox.persistent:
        unavailable = (
            f"the persistent bwrap sandbox (the sandbox backend is {backend.name}, "
            f"sandbox.persistent is {str(config.sandbox.persistent).lower()})"
        )
    return for_sandbox(
        config,
        workspace,
        unavailable=unavailable,
        warnings=sandbox.warnings,
        quota_bytes=sandbox.changeset_quota_bytes(),
    )


def _with_note(output: ToolOutput, settlement: Settlement | None) -> ToolOutput:
    """Tell the agent which of its changes wait for a person, and why."""
    if settlement is None or not settlement.new_held:
        return output
    from ..changes import topmost

    shown = topmost(settlement.new_held)
    lines = [f"- {p.path} ({p.kind}): {p.reason}" for p in shown[:20]]
    more = len(shown) - len(lines)
    if more > 0:
        lines.append(f"- ... and {more} more")
    note = (
        "\n[agentvisor: these changes stay in this session's view and wait for a person "
        "(agentvisor changes / apply); they are not in the real workspace:\n"
        + "\n".join(lines)
        + "]"
    )
    return replace(output, text=output.text + note)


def _check_arguments(spec: ToolSpec, arguments: dict[str, Any]) -> str | None:
    if (where := _lone_surrogate(arguments)) is not None:
        return (
            f"{where}: holds a lone surrogate (a \\ud800-\\udfff escape without its pair), "
            "which is no character: UTF-8, paths and command lines cannot carry it"
        )
    error = next(iter(_validator(spec.name, spec).iter_errors(arguments)), None)
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message}"


def _lone_surrogate(value: Any, where: str = "arguments") -> str | None:
    """Where in ``value`` a string holds a lone surrogate (JSON can write one, Python keeps
    it, and every encoder later fails on it), or None. Keys are looked at too."""
    if isinstance(value, str):
        return where if _SURROGATE.search(value) else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _lone_surrogate(key, f"{where} key") or _lone_surrogate(item, f"{where}.{key}")
            if found:
                return found
    if isinstance(value, list):
        return next(
            (f for i, item in enumerate(value) if (f := _lone_surrogate(item, f"{where}[{i}]"))),
            None,
        )
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


_VALIDATORS: dict[str, Any] = {}


def _validator(name: str, spec: ToolSpec) -> Any:
    """One compiled validator per tool: checking the schema itself costs more than a call."""
    validator = _VALIDATORS.get(name)
    if validator is None or validator.schema is not spec.input_schema:
        import jsonschema

        cls = jsonschema.validators.validator_for(spec.input_schema)
        cls.check_schema(spec.input_schema)
        validator = _VALIDATORS[name] = cls(spec.input_schema)
    return validator


def _call_event(
    kind: str, session: Session, tool: str, arguments: Any, decision: Decision | None
) -> AuditEvent:
    return AuditEvent(
        kind=kind,
        session=session.id,
        agent=session.agent,
        tool=tool,
        arguments=arguments,
        decision=decision.verdict if decision else None,
        rule=decision.rule if decision else None,
        reason=decision.reason if decision else None,
        approver=getattr(decision, "approver", None) if decision else None,
    )


def _step(
    steps: Judging, answer: Decision | None
) -> tuple[tuple[Action, Context, Decision] | None, tuple[Decision, ToolOutput | None]]:
    """One step of judging: the next ask, or (None, the result)."""
    try:
        return steps.send(answer), _NO_RESULT  # type: ignore[arg-type]  # None starts it
    except StopIteration as done:
        return None, done.value


_NO_RESULT: tuple[Decision, ToolOutput | None] = (Decision("deny", "not judged yet"), None)


def _judge_failed(tool: str, exc: Exception) -> tuple[Decision, ToolOutput]:
    reason = f"the call could not be judged: {_reason(exc)}"
    return Decision("deny", reason, "gateway:judge-failed"), _failed(tool, exc)


def _refused_ask(decision: Decision, why: str, rule: str) -> Decision:
    """An ask denied without a person's answer (over a cap, or withdrawn)."""
    return Decision("deny", f"{why}. It needed approval because: {decision.reason}", rule)


def _over_ask_limit(decision: Decision, why: str) -> Decision:
    why = f"{why}; answer them or let them time out first"
    return _refused_ask(decision, why, "gateway:ask-limit")


def _withdrawn(ask: Ask, decision: Decision) -> Decision:
    return _refused_ask(decision, f"the ask was withdrawn: {ask.withdrawn}", "gateway:withdrawn")


def _nul_byte(action: Action) -> Decision | None:
    """Rule gateway:nul-byte. No program or path can receive a NUL byte (C strings end
    there), so what the policy read would not be what ran: refuse before judging."""
    if "\x00" in action.target or any("\x00" in arg for arg in action.argv or ()):
        return Decision(
            "deny",
            "it contains a NUL byte (\\0), which no command line or path can carry",
            "gateway:nul-byte",
        )
    return None


# An absolute path in an exception's text (not the path of a URL): masked for the agent.
_HOST_PATH = re.compile(r"(?<![\w:/.])/[^\s'\",;()]+")


def _reason(exc: BaseException) -> str:
    """What went wrong, in words and without host paths: an OSError's strerror (its
    filename is a host path), else the first line of the message with paths masked."""
    if isinstance(exc, OSError) and exc.strerror:
        return f"{exc.strerror} ({type(exc).__name__})"
    first = (str(exc).splitlines() or [""])[0][:300]
    text = _HOST_PATH.sub("<path>", first)
    return f"{text} ({type(exc).__name__})" if text else type(exc).__name__


def _failed(tool: str, exc: Exception) -> ToolOutput:
    """A failure that is not agentvisor's own, as a tool error the agent can read; the
    stack goes to the operator's log only."""
    log.error("%s failed", tool, exc_info=exc)
    return ToolOutput(f"{tool} failed: {_reason(exc)}", is_error=True)


def _unrecorded(tool: str, exc: Exception) -> ToolOutput:
    """The refusal of a call whose intent the audit log could not take. The database's own
    message (e.g. "database or disk is full") says why; it names no host path."""
    why = str(getattr(exc, "orig", None) or type(exc).__name__).splitlines()[0][:200]
    return ToolOutput(
        f"{tool}: refused, nothing ran: the audit log could not record this call before "
        f"running it ({why}). Every call is recorded before it runs; ask the operator to "
        "check the gateway's state database (audit.url).",
        is_error=True,
    )


def _summary(output: ToolOutput) -> str:
    first = output.text.strip().splitlines()[:1]
    return ("error: " if output.is_error else "") + (first[0][:200] if first else "")
