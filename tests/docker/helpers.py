"""Run probes in a real docker-backend sandbox."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from agentvisor.config import DockerConfig, SandboxConfig
from agentvisor.sandbox import Result, Sandbox

# CLI runs here test this process's sandbox, not a gateway another test may have started.
CLI_ENV = {**os.environ, "AGENTVISOR_NO_GATEWAY": "1"}


def config(**settings: Any) -> SandboxConfig:
    docker = settings.pop("docker", {})
    docker_cfg = DockerConfig().model_copy(update=docker)
    return SandboxConfig(backend="docker", docker=docker_cfg).model_copy(update=settings)


def sandbox(ws: Path, **settings: Any) -> Sandbox:
    return Sandbox(config(**settings), workspace=ws)


def sh(ws: Path, script: str, timeout: float = 60, **settings: Any) -> Result:
    return sandbox(ws, **settings).run(["sh", "-c", script], timeout=timeout)


def py(ws: Path, code: str, timeout: float = 60, **settings: Any) -> Result:
    return sandbox(ws, **settings).run(["python3", "-c", code], timeout=timeout)


def py_host(code: str) -> subprocess.CompletedProcess[str]:
    """The control: the same probe on the host."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def text(result: Result) -> str:
    return (result.stdout + result.stderr).decode(errors="replace")


def managed(api: Any) -> list[str]:
    return [c["Id"] for c in api.containers(all=True, filters={"label": "agentvisor.managed=1"})]
