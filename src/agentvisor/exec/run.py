"""`run(request)`: the whole of one `agentvisor exec` run, wherever it is served.

The CLI calls it in its own process; the exec server (a gateway's, or the exec helper)
calls it on behalf of a CLI, with the client's terminal as ``stdio``. Heavy modules are
imported inside `run`: the CLI pays for them only when it runs the command itself.
"""

from __future__ import annotations

import contextlib

from .request import ExecRequest

TYPE_CHECKING = False  # typing costs milliseconds on every `exec`
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from typing import Any, Protocol

    from ..actions import Action, Context, Decision
    from ..config import Config
    from ..policy import PolicyEngine
    from ..sandbox import Sandbox
    from ..sandbox.base import Attachment, Result

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
    broker: Resolver | None = None,
    reuse: Reuse | None = None,
    config_seen: Callable[[Config], None] | None = None,
) -> int:
    """Run ``request`` and return the command's exit status (124 on timeout); raises
    `AgentvisorError` when agentvisor refuses or fails.

    ``stdio`` (with ``cancel_fd``): the client's terminal, for a run served on its behalf.
    ``reuse(key, make)`` lets a long-lived caller keep the sandbox and the policy engine
    between runs with the same inputs (the exec server does); ``config_seen`` is told the
    config once it is loaded."""

    def made(key: tuple[object, ...], make: Callable[[], Any]) -> Any:
        return reuse(key, make) if reuse is not None else make()

    import os

    from ..config import load_config
    from ..errors import ConfigError
    from ..policy import PolicyEngine
    from ..sandbox import Sandbox

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
    # Config records hold lists (unhashable); their repr shows every value.
    sandbox = made(
        ("sandbox", repr(sandbox_cfg), workspace, backend, tuple(environ.items())),
        lambda: Sandbox(sandbox_cfg, workspace=workspace, backend=backend, environ=environ),
    )
    for warning in sandbox.warnings:
        say(f"agentvisor: warning: {warning}")
    if request.dry_run:
        import shlex

        print(shlex.join(sandbox.backend.dry_run(argv)))
        return 0
    engine = made(("policy", repr(config)), lambda: PolicyEngine.from_config(config))
    check_policy(config, argv, sandbox, broker, engine)
    proxy = None
    if sandbox_cfg.network == "proxy":
        from ..net.access import NetworkAccess
        from ..net.proxy import EgressProxy

        # The command's destinations are asked where its command line was (a gateway's
        # people, capped and bound to this client), not on the server's own terminal.
        resolve_ask = broker.resolve if broker is not None else None
        access = NetworkAccess.from_config(config, resolve_ask=resolve_ask)
        proxy = EgressProxy.from_config(config, access=access).start()
    attachment = proxy.attachment() if proxy else None
    attached = (stdio, cancel_fd) if stdio is not None and cancel_fd is not None else None
    try:
        result = _run_on_terminal(sandbox, argv, attached, attachment, request.raw_output)
    finally:
        if proxy is not None:
            proxy.stop()
    if result.timed_out:
        say(f"agentvisor: timed out after {sandbox_cfg.timeout:g} s; the sandbox was ended")
    elif result.limits_hit:
        say(f"agentvisor: the command hit the {', '.join(result.limits_hit)} limit")
    return int(result.exit_code)


def _run_on_terminal(
    sandbox: Sandbox,
    argv: list[str],
    attached: tuple[Sequence[int], int] | None,
    attachment: Attachment | None,
    raw_output: bool,
) -> Result:
    """Run with the caller's stdio (``attached``: a client's fds and cancel socket; else
    this process's own), guarding any terminal among them (`agentvisor.exec.terminal`)."""
    import os

    caller = list(attached[0]) if attached is not None else [0, 1, 2]
    if not any(os.isatty(fd) for fd in caller):  # scripts and pipes: nothing to guard
        return _launch(sandbox, argv, attached, attachment)
    from .terminal import TerminalGuard

    with TerminalGuard(caller, filter_output=not raw_output) as child:
        if attached is not None:
            return _launch(sandbox, argv, (child, attached[1]), attachment)
        with _as_own_stdio(child):
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


@contextlib.contextmanager
def _as_own_stdio(child: list[int]) -> Iterator[None]:
    """This process's stdin, stdout and stderr are ``child``'s for the time of an
    in-process run (the sandbox inherits them)."""
    import os
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (0, 1, 2) if child[fd] != fd}
    for fd in saved:
        os.dup2(child[fd], fd)
    try:
        yield
    finally:
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


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
