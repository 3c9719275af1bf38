"""Fixtures for changesets: a real git workspace, a gateway over it, an agent's commands."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from agentvisor.approvals import ApprovalBroker
from agentvisor.config import config_from_dict
from agentvisor.gateway import Gateway, Session
from agentvisor.state.events import SQLiteAuditLog
from tests.conftest import run_cli

GIT = "/usr/bin/git"


def git(workspace: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [GIT, "-C", str(workspace), *args],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return result.stdout


@pytest.fixture(autouse=True)
def _own_home(isolated_home: Path) -> Path:
    """Every test here gets its own $HOME: the state (changesets, audit) is below it."""
    return isolated_home


@pytest.fixture
def repo(workspace: Path, isolated_home: Path) -> Path:
    """A git repository with a committed source folder, as a user's project would be."""
    (isolated_home / ".gitconfig").write_text("[user]\n\tname = T\n\temail = t@example.com\n")
    git(workspace, "init", "-q", "-b", "main")
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("print('app')\n")
    (workspace / "src" / "util.py").write_text("X = 1\n")
    (workspace / "README.md").write_text("# project\n")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "first")
    return workspace


def make_gateway(workspace: Path, tmp_path: Path, **workspace_keys: object) -> Gateway:
    """A gateway on the real bwrap backend; ``workspace_keys`` are its ``workspace:``."""
    cfg = config_from_dict(
        {"approvals": {"timeout": 5}, "sandbox": {"timeout": 60}, "workspace": workspace_keys}
    )
    broker = ApprovalBroker(cfg, channels=[], grants=None)
    return Gateway(
        cfg, workspace=workspace, broker=broker, audit=SQLiteAuditLog(tmp_path / "audit.db")
    )


@pytest.fixture
def gateway(repo: Path, tmp_path: Path):
    gw = make_gateway(repo, tmp_path)
    yield gw
    gw.close()


def agent_runs(gateway: Gateway, session: Session, script: str) -> str:
    """What an agent does with a shell script: written by write_file, run by terminal
    (one call each, as an agent would; the script is a workspace file like any other)."""
    out = gateway.call(session, "write_file", {"path": ".agent-step.sh", "content": script})
    assert not out.is_error, out.text
    out = gateway.call(session, "terminal", {"command": "bash .agent-step.sh"})
    return out.text


def cli(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, HOME=str(home))
    for var in ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env.pop(var, None)
    return run_cli(*args, env=env, cwd=home)
