"""A session: one agent connection, its toolsets, its own sandbox and its own file guard."""

from __future__ import annotations

import contextlib
import os
import secrets
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..actions import Context
from ..errors import SandboxError
from ..fileguard import FileGuard
from ..records import replace
from ..sandbox import Attachment, Result
from ..sandbox.identity import sandbox_user
from ..sandbox.view import OverlayChannel
from .tools import ToolSpec, select

if TYPE_CHECKING:
    from ..changes.settling import WriteDecider
    from ..changes.store import SessionStore
    from ..sandbox.base import Backend
    from ..sandbox.persistent import Job, PersistentSandbox
    from . import Gateway


class Session:
    def __init__(
        self,
        gateway: Gateway,
        *,
        agent: str | None,
        toolsets: Sequence[str],
        session_id: str | None = None,
    ) -> None:
        self.gateway = gateway
        self.id = session_id or "s-" + secrets.token_hex(6)
        self.agent = agent
        self.toolsets = list(toolsets)
        self.tools: dict[str, ToolSpec] = select(gateway.tools, self.toolsets)
        self.created = time.time()
        self.last_used = time.monotonic()
        cfg = gateway.config
        self.files = FileGuard(
            gateway.workspace,
            write_roots=[Path(p) for p in cfg.files.write_roots],
            read_roots=[Path(p) for p in cfg.files.read_roots],
            protected_extra=tuple(cfg.sandbox.protected_paths),
            # The sandbox's list: also the operator's config file when it is in the workspace.
            readonly_extra=tuple(gateway.sandbox.config.readonly_paths),
            max_read_bytes=cfg.files.max_read_bytes,
            max_write_bytes=cfg.files.max_write_bytes,
            view=self._view if gateway.changesets is not None else None,
            view_writer=_view_writer(gateway.workspace),
        )
        self._lock = threading.Lock()
        # The session's changeset and the descriptor of its overlay view (agentvisor.changes).
        self.changeset: SessionStore | None = None
        self._view_fd: int | None = None
        self._live_fd: int | None = None  # tells the CLI this changeset's session runs
        self._persistent: PersistentSandbox | None = None
        self._container: Backend | None = None  # the backend for_session gave this session
        self._proxy: Any = None
        self._web: Any = None
        self.closed = False
        self._calls = 0  # calls in progress: a session running one is not idle
        self.client = "local"  # who connected (set by the front end): asks are capped per client

    @property
    def sandbox_running(self) -> bool:
        """Whether the session's persistent sandbox is up (for dashboards)."""
        return self._persistent is not None and self._persistent.alive

    def context(self, tool: str | None = None) -> Context:
        return Context(
            session=self.id,
            agent=self.agent,
            toolset=",".join(self.toolsets),
            workspace=str(self.gateway.workspace),
            tool=tool,
        )

    @contextlib.contextmanager
    def in_call(self) -> Iterator[None]:
        """Around one call: the session is busy meanwhile, and used at its start and end
        (a long command is not idle time)."""
        with self._lock:
            self._calls += 1
            self.last_used = time.monotonic()
        try:
            yield
        finally:
            with self._lock:
                self._calls -= 1
                self.last_used = time.monotonic()

    @property
    def busy(self) -> bool:
        return self._calls > 0

    def stop_idle_sandbox(self, idle_for: float) -> bool:
        """Stop the sandbox if no call came for ``idle_for`` seconds, none is running and
        it runs nothing (no background job); whether it stopped. The session lives on:
        its next call starts a fresh sandbox over the same changeset."""
        with self._lock:
            if self._calls or time.monotonic() - self.last_used < idle_for:
                return False
            if self._persistent is None or not self._persistent.reclaim():
                return False
            self._persistent = None
            self._close_view()  # the view's descriptor holds the stopped sandbox's mount
            return True

    # -- the sandbox --------------------------------------------------------------------

    @property
    def persistent(self) -> bool:
        return (
            self.gateway.config.sandbox.persistent
            and self.gateway.sandbox.backend.persistent_sessions
        )

    def _attachment(self) -> Attachment | None:
        if self.gateway.config.sandbox.network != "proxy":
            return None
        if self._proxy is None:
            from ..net.proxy import EgressProxy

            self._proxy = EgressProxy.from_config(self.gateway.config, session=self.id).start()
        return self._proxy.attachment()

    def sandbox(self) -> PersistentSandbox:
        with self._lock:
            if self.closed:
                raise SandboxError("this session has ended")
            if self._persistent is None or not self._persistent.alive:
                if self.gateway.changesets is None:
                    backend = self.gateway.sandbox.backend
                    self._persistent = backend.open_persistent(self._attachment())
                else:
                    self._persistent = self._start_over_changeset()
                self.gateway.lifecycle(self, "sandbox started")
            return self._persistent

    def _start_over_changeset(self) -> PersistentSandbox:
        """Start the sandbox with the session's changeset mounted over the workspace, and
        keep the view's descriptor for the host-side file tools."""
        changesets = self.gateway.changesets
        assert changesets is not None
        if self.changeset is None:
            self.changeset = changesets.start(self.id)
            self._live_fd = self.changeset.hold_live()
        self._close_view()  # one mount per upper directory at a time
        channel = OverlayChannel(str(self.changeset.upper), str(self.changeset.work))
        try:
            attachment = replace(self._attachment() or Attachment(), overlay=channel.overlay)
            sandbox = self.gateway.sandbox.backend.open_persistent(attachment)
            self._view_fd = channel.receive_view()
        finally:
            channel.close()
        return sandbox

    def _view(self) -> int:
        """The workspace as this session's sandbox sees it (starting the sandbox)."""
        self.sandbox()
        if self._view_fd is None:
            raise SandboxError("the session's workspace view is not available")
        return self._view_fd

    def _close_view(self) -> None:
        if self._view_fd is not None:
            os.close(self._view_fd)
            self._view_fd = None

    # -- the changeset ------------------------------------------------------------------

    def write_policy(self) -> WriteDecider:
        """The write policy that settling this session's changeset applies (see
        agentvisor.changes)."""
        from ..changes.settling import write_policy

        return write_policy(self.gateway.policy, self.context("workspace"))

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
    ) -> Result:
        if self.persistent:
            return self.sandbox().run(argv, cwd=cwd, timeout=timeout, stdin=stdin)
        # Docker keeps one container per session (persistent unless configured otherwise).
        with self._lock:
            if self._container is None:
                self._container = self.gateway.sandbox.backend.for_session(self.id)
            backend = self._container
        return backend.run(
            argv,
            cwd=Path(cwd) if cwd else None,
            timeout=timeout,
            stdin=stdin,
            attachment=self._attachment(),
        )

    def start_background(self, argv: Sequence[str], *, cwd: str | None = None) -> Job:
        if not self.persistent:
            raise SandboxError(
                "background jobs need a persistent sandbox "
                "(sandbox.persistent: true and the bwrap backend)"
            )
        return self.sandbox().start(argv, cwd=cwd)

    def jobs(self) -> list[Job]:
        return self._persistent.jobs() if self._persistent else []

    def job(self, job_id: Any) -> Job | None:
        if self._persistent is None or not isinstance(job_id, int):
            return None
        return self._persistent.job(job_id)

    def kill(self, job: Job) -> None:
        if self._persistent is not None:
            self._persistent.kill(job)

    # -- host-side network --------------------------------------------------------------

    def web(self) -> Any:
        """The session's web tools, wired to the gateway's policy, approvals and audit."""
        with self._lock:
            if self._web is None:
                from ..net.access import NetworkAccess
                from ..net.client import Fetcher
                from ..net.guard import Guard
                from ..net.tools import WebTools

                gw = self.gateway
                access = NetworkAccess(
                    gw.policy,
                    Guard(extra_blocked=gw.config.network.block),
                    resolve_ask=gw.resolve_ask,
                    on_event=gw.network_event,
                )
                fetcher = Fetcher.from_config(gw.config, access=access)
                self._web = WebTools.from_config(gw.config, session=self.id, fetcher=fetcher)
            return self._web

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._persistent is not None:
                self._persistent.close()
                self.gateway.lifecycle(self, "sandbox ended")
            self._close_view()
            if self._live_fd is not None:  # the changeset's session no longer runs
                os.close(self._live_fd)
                self._live_fd = None
            if self._container is not None:
                self._container.close()
                self.gateway.lifecycle(self, "container ended")
            if self._proxy is not None:
                self._proxy.stop()
            if self._web is not None:
                self._web.close()


def _view_writer(workspace: Path) -> tuple[int, int] | None:
    """Who writes through a changeset view: the sandbox's host user, when it is not this
    process (a root caller's; its overlay maps that user only)."""
    user = sandbox_user(workspace)
    return (user.uid, user.gid) if user.switches else None
