"""`run(request)`: the whole of one `agentvisor exec` run, wherever it is served.

The CLI calls it in its own process; the exec server (a gateway's, or the exec helper)
calls it on behalf of a CLI, with the client's terminal as ``stdio``. Heavy modules are
imported inside `run`: the CLI pays for them only when it runs the command itself.
"""

from __future__ import annotations

from . import changeset
from .request import ExecRequest

TYPE_CHECKING = False  # typing costs milliseconds on every `exec`
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, Protocol

    from ..actions import Action, Context, Decision
    from ..config import Config
    from ..policy import PolicyEngine
    from ..sandbox import Sandbox
    from ..sandbox.base import Attachment, Result
    from ..state import AuditStore
    from ..state.events import AuditEvent

    Reuse = Callable[[tuple[object, ...], Callable[[], Any]], Any]

    class Resolver(Protocol):
        """Who answers an ask: an `ApprovalBroker`, or the exec helper handing it back."""

        def resolve(self, action: Action, context: Context, decision: Decision) -> Decision: ...


def run(
    request: ExecRequest,
    *,
    say: Callable[[str], None],
    stdio: Sequence[int] | None = None,
    cancel_fd: int | None = None,
    caller: int | None = None,
    broker: Resolver | None = None,
    reuse: Reuse | None = None,
    config_seen: Callable[[Config], None] | None = None,
) -> int:
    """Run ``request`` and return the command's exit status (124 on timeout); raises
    `AgentvisorError` when agentvisor refuses or fails.

    ``stdio`` (with ``cancel_fd``): the client's terminal, for a run served on its behalf;
    ``caller``: the client's pid (its terminal's keys are relayed while it is the foreground
    job).
    ``reuse(key, make)`` lets a long-lived caller keep the sandbox and the policy engine
    between runs with the same inputs (the exec server does); ``config_seen`` is told the
    config once it is loaded."""

    def made(key: tuple[object, ...], make: Callable[[], Any]) -> Any:
        return reuse(key, make) if reuse is not None else make()

    import os

    from ..config import load_config
    from ..errors import ConfigError
    from ..policy import PolicyEngine

    argv = list(request.argv)
    if not argv:
        raise ConfigError("exec needs a command: agentvisor exec -- CMD [ARG...]")
    environ = request.environ
    config = load_config(request.config, cwd=request.cwd, environ=environ)
    if config_seen is not None:
        config_seen(config)
    sandbox_cfg = config.sandbox
    if request.network:
        sandbox_cfg = sandbox_cfg.model_copy(update={"network": request.network})
    if request.timeout is not None:
        if request.timeout <= 0:
            raise ConfigError("--timeout must be greater than 0")
        sandbox_cfg = sandbox_cfg.model_copy(update={"timeout": request.timeout})
    workspace = os.path.join(request.cwd, request.workspace) if request.workspace else request.cwd
    backend = request.backend
    # sandbox.disk_mb bounds the workspace only through a changeset's size-limited layers.
    overlaid = changeset.wanted(config, backend)
    # Config records hold lists (unhashable); their repr shows every value.
    # With the config's source: a config file in the workspace is kept read-only.
    configured = config.model_copy(update={"sandbox": sandbox_cfg})
    sandbox = made(
        (
            "sandbox",
            repr(sandbox_cfg),
            config.source,
            workspace,
            backend,
            overlaid,
            tuple(environ.items()),
        ),
        lambda: _sandbox(request, config, configured, workspace, overlaid),
    )
    for warning in sandbox.warnings:
        say(f"agentvisor: warning: {warning}")
    if request.dry_run:
        import shlex

        print(shlex.join(sandbox.backend.dry_run(argv)))
        return 0
    engine = made(("policy", repr(config)), lambda: PolicyEngine.from_config(config))
    check_policy(config, argv, sandbox, broker, engine)
    changesets = changeset.changesets_for(config, sandbox, say)
    proxy = None
    if sandbox_cfg.network == "proxy":
        from ..net.proxy import EgressProxy

        proxy = EgressProxy.from_config(config).start()
    attachment = proxy.attachment() if proxy else None
    attached = (stdio, cancel_fd) if stdio is not None and cancel_fd is not None else None

    def launch(attachment: Attachment | None) -> Result:
        return _run_on_terminal(
            sandbox, argv, attached, attachment, request.raw_output, caller or os.getpid()
        )

    try:
        if changesets is None:
            result = launch(attachment)
        else:
            audit = made(("audit", repr(config.audit)), lambda: _audit_log(config))
            result = changeset.run_over(
                changesets, engine, attachment, launch, audit=audit, say=say
            )
    finally:
        if proxy is not None:
            proxy.stop()
    if result.timed_out:
        say(f"agentvisor: timed out after {sandbox_cfg.timeout:g} s; the sandbox was ended")
    elif result.limits_hit:
        say(f"agentvisor: the command hit the {', '.join(result.limits_hit)} limit")
    return int(result.exit_code)


def _sandbox(
    request: ExecRequest,
    config: Config,
    configured: Config,
    workspace: str,
    overlaid: bool,
) -> Sandbox:
    """The run's sandbox; a limit it cannot enforce is refused naming the config files."""
    from ..errors import LimitNotEnforced
    from ..sandbox import Sandbox

    try:
        return Sandbox(
            configured,
            workspace=workspace,
            backend=request.backend,
            environ=request.environ,
            workspace_quota=overlaid,
        )
    except LimitNotEnforced as exc:
        raise LimitNotEnforced(f"{exc} [config: {_config_files(request, config)}]") from exc


def _config_files(request: ExecRequest, config: Config) -> str:
    """The files the run's config came from: the operator's, and a project file over it."""
    from ..config import project_file

    files = [config.source or "the built-in defaults"]
    project = project_file(request.cwd) if request.config is None else None
    if project is not None:
        files.append(f"{project} (project file)")
    return ", ".join(files)


def _audit_log(config: Config) -> Callable[[list[AuditEvent]], None]:
    """Where the changes a run applied or held are recorded: the audit log, opened at the
    first run that changed something (SQLAlchemy costs a run that changed nothing)."""
    opened: list[AuditStore] = []

    def record(events: list[AuditEvent]) -> None:
        if not opened:
            from ..state import AuditStore

            opened.append(AuditStore.open(config.audit.url, config.audit.retention_days))
        opened[0].record_many(events)

    return record


def _run_on_terminal(
    sandbox: Sandbox,
    argv: list[str],
    attached: tuple[Sequence[int], int] | None,
    attachment: Attachment | None,
    raw_output: bool,
    caller: int,
) -> Result:
    """Run with the caller's stdio (``attached``: a client's fds and cancel socket; else
    this process's own), guarding any terminal among them (`agentvisor.exec.terminal`):
    the command gets pseudo-terminals, never the caller's terminal itself."""
    import os

    stdio = list(attached[0]) if attached is not None else [0, 1, 2]
    if not any(os.isatty(fd) for fd in stdio):  # scripts and pipes: nothing to guard
        return _launch(sandbox, argv, attached, attachment)
    from .terminal import TerminalGuard, as_own_stdio

    with TerminalGuard(stdio, filter_output=not raw_output, caller=caller) as child:
        if attached is not None:
            return _launch(sandbox, argv, (child, attached[1]), attachment)
        with as_own_stdio(child):
            return _launch(sandbox, argv, None, attachment)


def _launch(
    sandbox: Sandbox,
    argv: list[str],
    attached: tuple[Sequence[int], int] | None,
    attachment: Attachment | None,
) -> Result:
    if attached is not None:
        stdio, cancel_fd = attached
        return sandbox.run_attached(argv, stdio=stdio, cancel_fd=cancel_fd, attachment=attachment)
    return sandbox.run(argv, capture=False, attachment=attachment)


def check_policy(
    config: Config,
    argv: list[str],
    sandbox: Sandbox,
    broker: Resolver | None = None,
    engine: PolicyEngine | None = None,
) -> None:
    """The same decision the gateway makes for a command; an ask goes to the broker."""
    import shlex

    from ..actions import Action, Context
    from ..errors import PolicyDenied
    from ..policy import PolicyEngine

    action = Action("exec", shlex.join(argv), argv=tuple(argv))
    context = Context(tool="exec", workspace=str(sandbox.workspace))
    engine = engine or PolicyEngine.from_config(config)
    decision = engine.decide(action, context)
    if decision.verdict == "ask":
        if broker is None:
            from ..approvals import ApprovalBroker

            broker = ApprovalBroker(config)
        decision = broker.resolve(action, context, decision)
    if decision.verdict != "allow":
        rule = f" [{decision.rule}]" if decision.rule else ""
        hint = f"; to allow it: {decision.hint}" if decision.hint and not decision.hardline else ""
        raise PolicyDenied(f"refused: {decision.reason}{rule}{hint}", decision)
