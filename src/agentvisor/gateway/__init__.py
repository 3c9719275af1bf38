"""The gateway: one pipeline for every tool call, whatever front end it came from.

    Gateway.call(session, tool, arguments)
      1. the tool must be in the session's toolsets; arguments must match its schema
      2. the tool turns the arguments into actions (exec / read / write / tool ...)
      3. the policy engine decides each action; an ``ask`` goes to the approval broker
      4. the first refusal ends the call with a message: what, why, how to allow it
      5. the tool runs (in the session's sandbox, or on the host's guarded network)
      6. the result is shaped: terminal escapes stripped, secrets redacted, output capped
      7. one audit event records the call, its decision, and a summary of the result

The MCP server, the CLI and the Python API are thin shells over `Gateway`; none of them
decides anything.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from ..actions import Action, Context, Decision
from ..config import Config
from ..errors import AgentvisorError
from ..records import replace
from ..sandbox import Sandbox
from ..state.events import AuditEvent, AuditLog
from .results import ToolOutput, refusal, shape
from .session import Session
from .tools import ToolSpec, builtin_tools

if TYPE_CHECKING:
    from ..changes import Changesets, Settlement

__all__ = ["Gateway", "Session", "ToolOutput", "ToolSource"]

# Tools made from the gateway itself, e.g. `agentvisor.wasm.gateway.tool_specs`: Wasm tools
# send their network requests through its policy, broker and audit log. The front ends
# pass them in, so this layer never imports the Wasm runtime above it.
ToolSource: TypeAlias = Callable[["Gateway"], Sequence[ToolSpec]]


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
        self.sandbox = sandbox or Sandbox(config, workspace=self.workspace)
        self.changesets = _changesets(config, self.workspace, self.sandbox)
        # Audit log, grants and the shared approval queue (audit.url / state.url).
        self.state = State.from_config(config, check_pattern=check_grant_pattern)
        self.state.start()
        self.policy = PolicyEngine.from_config(config, grants=self.state.grants)
        self.broker = (
            broker
            if broker is not None
            else ApprovalBroker(
                config,
                channels=[TerminalChannel(), self.state.channel(config.approvals.timeout)],
                grants=self.state.grants,
            )
        )
        self.audit: AuditLog = audit if audit is not None else self.state.audit
        extra = extra_tools(self) if callable(extra_tools) else extra_tools
        self.tools = [*builtin_tools(), *extra]
        self.sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self._redactor = self._make_redactor()
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
    ) -> Session:
        session = Session(
            self, agent=agent, toolsets=toolsets or self.config.toolsets, session_id=session_id
        )
        with self._lock:
            self.sessions[session.id] = session
        self.lifecycle(session, f"session opened with toolsets {','.join(session.toolsets)}")
        return session

    def close_session(self, session: Session) -> None:
        with self._lock:
            self.sessions.pop(session.id, None)
        self._record_all(self._settle(session)[1])  # what background jobs wrote last
        session.close()
        if self.changesets is not None and session.changeset is not None:
            self.changesets.finish(session.changeset)
        self.lifecycle(session, "session closed")

    def close(self) -> None:
        self._stop.set()
        for session in list(self.sessions.values()):
            self.close_session(session)

    # -- the pipeline -------------------------------------------------------------------

    def call(self, session: Session, tool: str, arguments: dict[str, Any] | None) -> ToolOutput:
        started = time.monotonic()
        session.touch()
        arguments = dict(arguments or {})
        decision: Decision | None = None
        changes: list[AuditEvent] = []
        spec = session.tools.get(tool)
        if spec is None:
            output = ToolOutput(
                f"the tool {tool!r} is not available in this session (toolsets: "
                f"{', '.join(session.toolsets)}; tools: "
                f"{', '.join(sorted(session.tools))})",
                is_error=True,
            )
        elif (problem := _check_arguments(spec, arguments)) is not None:
            output = ToolOutput(f"{tool}: invalid arguments: {problem}", is_error=True)
        else:
            output, decision = self._decide_and_run(session, spec, arguments)
            settlement, changes = self._settle(session)
            output = _with_note(output, settlement)
        output = shape(output, self.config.gateway.max_output_bytes, self.redact)
        call = AuditEvent(
            kind="call",
            session=session.id,
            agent=session.agent,
            tool=tool,
            arguments=self._redactor.any(arguments) if self._redactor else arguments,
            decision=decision.verdict if decision else ("error" if output.is_error else None),
            rule=decision.rule if decision else None,
            reason=decision.reason if decision else None,
            approver=getattr(decision, "approver", None) if decision else None,
            result=_summary(output),
            duration=time.monotonic() - started,
        )
        self._record_all([call, *changes])
        return output

    def _decide_and_run(
        self, session: Session, spec: ToolSpec, arguments: dict[str, Any]
    ) -> tuple[ToolOutput, Decision]:
        actions = spec.actions(session, arguments)
        context = session.context(spec.name)
        # Tools with no action of their own (process on the session's own jobs; web tools,
        # which the network layer judges per destination) pass straight to running.
        decision = Decision("allow", "the call itself touches no resource")
        for action in actions:
            decision = self.decide(action, context)
            if not decision.allowed:
                return refusal(action, decision), decision
        try:
            return spec.run(session, arguments), decision
        except AgentvisorError as exc:
            return ToolOutput(str(exc), is_error=True), decision

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

    # The network layer calls back for asks and events of the web tools.
    def resolve_ask(self, action: Action, context: Context, decision: Decision) -> Decision:
        session = self.sessions.get(context.session or "")
        if session is not None:
            context = session.context(context.tool)
        return self.broker.resolve(action, context, decision)

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
        limit = self.config.sandbox.idle_timeout
        while not self._stop.wait(min(30.0, limit / 4)):
            now = time.monotonic()
            for session in list(self.sessions.values()):
                if now - session.last_used > limit:
                    self.lifecycle(session, f"idle for {limit:g} s")
                    self.close_session(session)


def _changesets(config: Config, workspace: Path, sandbox: Sandbox) -> Changesets | None:
    """The workspace's changesets, unless ``workspace.mode`` is direct. The overlay is
    mounted by the persistent bwrap sandbox's mount step; other backends and one-off
    sandboxes cannot offer it yet (`for_sandbox` refuses or warns)."""
    from ..changes.settling import for_sandbox

    backend = sandbox.backend
    unavailable = None
    if backend.name != "bwrap" or not config.sandbox.persistent:
        unavailable = (
            f"the persistent bwrap sandbox (the sandbox backend is {backend.name}, "
            f"sandbox.persistent is {str(config.sandbox.persistent).lower()})"
        )
    return for_sandbox(config, workspace, unavailable=unavailable, warnings=sandbox.warnings)


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
    error = next(iter(_validator(spec.name, spec).iter_errors(arguments)), None)
    if error is None:
        return None
    where = ".".join(str(p) for p in error.absolute_path)
    return f"{where + ': ' if where else ''}{error.message}"


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


def _summary(output: ToolOutput) -> str:
    first = output.text.strip().splitlines()[:1]
    return ("error: " if output.is_error else "") + (first[0][:200] if first else "")
