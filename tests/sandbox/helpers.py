"""Run probes inside a real sandbox, and the same probe outside as a control."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

from agentvisor.config import SandboxConfig
from agentvisor.sandbox import Result, Sandbox


def sandbox(workspace: Path, **settings: Any) -> Sandbox:
    return Sandbox(SandboxConfig().model_copy(update=settings), workspace=workspace)


def py_inside(workspace: Path, code: str, timeout: float = 30, **settings: Any) -> Result:
    return sandbox(workspace, **settings).run(["python3", "-c", code], timeout=timeout)


def py_outside(code: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The control: the same probe on the host, where it must succeed."""
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=30
    )


def text(result: Result) -> str:
    return (result.stdout + result.stderr).decode(errors="replace")
