"""The ``local`` backend: no isolation at all, for trusted use only.

Commands run directly on the host with the filtered environment, the resource limits
and the timeout, but with the caller's network, files and processes. Choosing it
prints a warning every time; policy still applies to every command.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ..errors import SandboxUnavailable
from . import runner
from .base import Attachment, Chunk, Result
from .limits import LimitPlan

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from ..config import SandboxConfig
    from .persistent import PersistentSandbox

WARNING = (
    "sandbox.backend is 'local': commands run WITHOUT isolation, with this user's "
    "network, files and processes"
)


class LocalBackend:
    name = "local"
    persistent_sessions = False

    def __init__(
        self, cfg: SandboxConfig, workspace: Path, limits: LimitPlan, env: Mapping[str, str]
    ) -> None:
        self.cfg = cfg
        self.workspace = workspace
        self.limits = limits
        self.env = dict(env)

    def _prepared(
        self, argv: Sequence[str], cwd: Path | None, attachment: Attachment | None
    ) -> runner.Prepared:
        env = {**self.env, **(attachment.env if attachment else {})}
        prefix = list(attachment.argv_prefix) if attachment else []
        return runner.Prepared(
            argv=[*prefix, *argv],
            env=env,
            layout=None,
            limits=self.limits,
            cwd=str(cwd or self.workspace),
        )

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        attachment: Attachment | None = None,
        capture: bool = True,
    ) -> Result:
        return runner.run(
            self._prepared(argv, cwd, attachment),
            timeout=timeout or self.cfg.timeout,
            stdin=stdin,
            capture=capture,
        )

    def run_attached(
        self,
        argv: Sequence[str],
        *,
        stdio: Sequence[int],
        cancel_fd: int | None,
        cwd: Path | None = None,
        timeout: float | None = None,
        attachment: Attachment | None = None,
    ) -> Result:
        return runner.run_attached(
            self._prepared(argv, cwd, attachment),
            timeout=timeout or self.cfg.timeout,
            stdio=stdio,
            cancel_fd=cancel_fd,
        )

    def stream(
        self,
        argv: Sequence[str],
        *,
        cwd: Path | None = None,
        timeout: float | None = None,
        attachment: Attachment | None = None,
    ) -> Iterator[Chunk]:
        return runner.stream(
            self._prepared(argv, cwd, attachment), timeout=timeout or self.cfg.timeout
        )

    def dry_run(self, argv: Sequence[str], cwd: Path | None = None) -> list[str]:
        return list(argv)  # run as it is: no wrapper

    def for_session(self, session: str) -> LocalBackend:
        return self

    def open_persistent(self, attachment: Attachment | None = None) -> PersistentSandbox:
        raise SandboxUnavailable("the local backend has no persistent sandbox")

    def close(self) -> None:
        pass
