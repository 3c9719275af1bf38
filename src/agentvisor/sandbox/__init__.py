"""Run commands in a sandbox: ``Sandbox(config).run(argv, cwd=..., timeout=...)``.

`Sandbox` checks the config against this machine once (limits it can enforce, the
workspace and mounts against the protected paths, the environment allowlist) and then
runs any number of commands, each in a fresh sandbox of the configured backend.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from ..config import defaults
from ..errors import ConfigError
from .base import EXIT_TIMEOUT, Attachment, Backend, Chunk, Result
from .env import build_env
from .limits import check_enforced, plan_limits

TYPE_CHECKING = False  # the typing module costs milliseconds at every start
if TYPE_CHECKING:
    from ..config import Config, SandboxConfig

__all__ = ["EXIT_TIMEOUT", "Attachment", "Chunk", "Result", "Sandbox"]


def _config_file_read_only(
    cfg: SandboxConfig, source: str | None, workspace: Path
) -> SandboxConfig:
    """``cfg`` with the operator's config file (``source``) read-only when it lies in the
    workspace (``--config ops.yaml`` in the project): the sandbox could rewrite it, and the
    next run would obey it as the operator's (``sandbox.backend: local``)."""
    if source is None:
        return cfg
    real = os.path.realpath(source)
    if not real.startswith(f"{workspace}/"):
        return cfg
    relative = real[len(str(workspace)) + 1 :]
    return cfg.model_copy(update={"readonly_paths": [*cfg.readonly_paths, relative]})


class Sandbox:
    """A configured sandbox; each `run` or `stream` call gets a fresh one."""

    def __init__(
        self,
        config: Config | SandboxConfig | None = None,
        *,
        workspace: str | os.PathLike[str] | None = None,
        backend: str | Backend | None = None,
        environ: Mapping[str, str] | None = None,
        workspace_quota: bool = False,
    ) -> None:
        """``backend``: a backend name overriding ``sandbox.backend``, or a `Backend` to use
        as it is (a test double such as `fake.FakeBackend`). ``environ``: the caller's
        environment, filtered into the sandbox's (default: this process's).
        ``workspace_quota``: the caller routes every write to the workspace through a
        changeset on a size-limited image (the gateway's sessions), so ``sandbox.disk_mb``
        can bound it."""
        if config is None:
            config = defaults()
        # A Config holds its sandbox section (a check without importing the schema).
        cfg = config.sandbox if hasattr(config, "sandbox") else config
        if isinstance(backend, str):
            if backend not in ("bwrap", "docker", "local"):
                raise ConfigError(
                    f"unknown sandbox backend {backend!r} (accepted: bwrap, docker, local)"
                )
            cfg = cfg.model_copy(update={"backend": backend})
        self.workspace = Path(os.path.realpath(workspace or cfg.workspace or os.getcwd()))
        self.config = cfg = _config_file_read_only(
            cfg, getattr(config, "source", None), self.workspace
        )
        self.warnings: list[str] = []
        self.limit_mechanisms: dict[str, str] = {}
        self.backend: Backend = (
            self._configured_backend(cfg, environ, workspace_quota)
            if backend is None or isinstance(backend, str)
            else backend
        )

    def _configured_backend(
        self, cfg: SandboxConfig, environ: Mapping[str, str] | None, workspace_quota: bool
    ) -> Backend:
        # Docker's engine enforces a container's limits; the docker backend verifies them.
        limits = plan_limits(cfg, workspace_quota) if cfg.backend != "docker" else None
        if limits is not None:
            self.warnings += check_enforced(limits, cfg)
            self.limit_mechanisms = dict(limits.mechanisms)
        home = Path.home()
        env = build_env(
            os.environ if environ is None else environ,
            home=str(home),
            passthrough=cfg.env_passthrough,
            passthrough_secrets=cfg.env_passthrough_secrets,
        )
        self.warnings += [
            f"sandbox.env_passthrough: {name} looks like a credential and was not "
            "passed (use sandbox.env_passthrough_secrets to force it)"
            for name in env.dropped
        ]
        self.warnings += [
            f"sandbox.env_passthrough_secrets: forwarding {name} into the sandbox"
            for name in env.forwarded_secrets
        ]
        if limits is None:  # the docker backend
            from .docker import DockerBackend

            docker = DockerBackend(cfg, self.workspace, env.env, home)
            self.warnings += docker.warnings
            self.limit_mechanisms = dict(docker.mechanisms)
            return docker
        if cfg.backend == "local":
            from .local import WARNING, LocalBackend

            self.warnings.append(WARNING)
            return LocalBackend(cfg, self.workspace, limits, env.env)
        from .bwrap import BwrapBackend
        from .layout import Layout

        layout = Layout.for_config(cfg, self.workspace, home, caller=environ)
        return BwrapBackend(cfg, layout, limits, env.env, home)

    def changeset_quota_bytes(self) -> int | None:
        """What a changeset over the workspace may hold (``sandbox.disk_mb`` less the
        scratch tmpfs), when the limit plan found the mechanism for it (as root); None:
        unbounded, as the plan's warning said."""
        disk_mb = self.config.disk_mb
        if disk_mb is None or "disk_mb" not in self.limit_mechanisms:
            return None
        from .bwrap import workspace_quota_bytes

        return workspace_quota_bytes(self.config.tmp_size_mb, disk_mb, Path.home())

    def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        stdin: bytes | None = None,
        attachment: Attachment | None = None,
        capture: bool = True,
    ) -> Result:
        """Run ``argv`` and wait; output is captured unless ``capture`` is false."""
        _check_argv(argv)
        return self.backend.run(
            argv,
            cwd=_path(cwd),
            timeout=timeout,
            stdin=stdin,
            attachment=attachment,
            capture=capture,
        )

    def run_attached(
        self,
        argv: Sequence[str],
        *,
        stdio: Sequence[int],
        cancel_fd: int | None,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        attachment: Attachment | None = None,
    ) -> Result:
        """Run with the given stdin/stdout/stderr fds; end early when ``cancel_fd`` is
        readable. For a front end serving another process's terminal (the exec server)."""
        _check_argv(argv)
        return self.backend.run_attached(
            argv,
            stdio=stdio,
            cancel_fd=cancel_fd,
            cwd=_path(cwd),
            timeout=timeout,
            attachment=attachment,
        )

    def stream(
        self,
        argv: Sequence[str],
        *,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = None,
        attachment: Attachment | None = None,
    ) -> Iterator[Chunk]:
        """Run ``argv``, yielding output chunks; the last chunk carries the `Result`."""
        _check_argv(argv)
        return self.backend.stream(argv, cwd=_path(cwd), timeout=timeout, attachment=attachment)


def _check_argv(argv: Sequence[str]) -> None:
    if isinstance(argv, str) or not argv:
        raise ConfigError("argv must be a non-empty list of strings, e.g. ['ls', '-l']")


def _path(value: str | os.PathLike[str] | None) -> Path | None:
    return Path(value) if value is not None else None
