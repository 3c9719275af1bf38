"""A session: one agent connection, its toolsets, its own sandbox and its own file guard."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..actions import Context
from ..errors import SandboxError
from ..fileguard import FileGuard
from ..sandbox import Attachment, Result
from .tools import ToolSpec, select

if TYPE_CHECKING:
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
            readonly_extra=tuple(cfg.sandbox.readonly_paths),
            max_read_bytes=cfg.files.max_read_bytes,
            max_write_bytes=cfg.files.max_write_bytes,
        )
        self._lock = threading.Lock()
        self._persistent: PersistentSandbox | None = None
        self._container: Backend | None = None  # the backend for_session gave this session
        self._proxy: Any = None
        self._web: Any = None
        self.closed = False
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

    def touch(self) -> None:
        self.last_used = time.monotonic()

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
                self._persistent = self.gateway.sandbox.backend.open_persistent(self._attachment())
                self.gateway.lifecycle(self, "sandbox started")
            return self._persistent

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
            if self._container is not None:
                self._container.close()
                self.gateway.lifecycle(self, "container ended")
            if self._proxy is not None:
                self._proxy.stop()
            if self._web is not None:
                self._web.close()
