"""The first hour: `make run` picks a workspace a user would choose, and the banner of
`agentvisor serve` says where the workspace, MCP and the dashboard are and how to log in."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.conftest import REPO
from tests.gateway.conftest import serve

TOKEN = "a-dashboard-token-for-the-test"


def banner_of(gw_env, config: str = "") -> tuple[str, str, httpx.Response]:
    """The stderr of a real `agentvisor serve` (started, stopped), and its base URL."""
    if config:
        gw_env["config"].write_text(gw_env["config"].read_text() + config)
    with serve(gw_env) as (url, proc):
        base = url.removesuffix("/mcp")
        page = httpx.get(base + "/dashboard/", timeout=10)
    return proc.stderr.read(), base, page


def test_banner_names_workspace_mcp_and_dashboard_without_login_on_loopback(gw_env):
    stderr, base, page = banner_of(gw_env)
    assert f"workspace  {gw_env['ws']} (workspace.mode auto" in stderr
    assert f"MCP        {base}/mcp" in stderr
    assert f"dashboard  {base}/dashboard/ (no login for a browser on this machine)" in stderr
    # The URL printed is the dashboard, open to this machine as the banner says.
    assert page.status_code == 200 and "agentvisor" in page.text


def test_banner_names_the_token_login_and_never_the_token(gw_env):
    gw_env["env"]["AGENTVISOR_DASHBOARD_TOKEN"] = TOKEN
    stderr, base, page = banner_of(gw_env, "dashboard: {login: always}\n")
    assert f"dashboard  {base}/dashboard/ (log in with the dashboard token" in stderr
    assert TOKEN not in stderr
    assert page.status_code == 303 and page.headers["location"] == "/dashboard/login"


def test_banner_says_when_nobody_can_log_in(gw_env):
    stderr, _, _ = banner_of(gw_env, "dashboard: {login: always}\n")
    assert "(locked: set dashboard.token or AGENTVISOR_DASHBOARD_TOKEN to log in)" in stderr


def test_banner_says_when_the_dashboard_is_off(gw_env):
    stderr, _, page = banner_of(gw_env, "dashboard: {enabled: false}\n")
    assert "dashboard  off (dashboard.enabled: false)" in stderr
    assert page.status_code == 404


def workspace_script(home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """scripts/run-workspace.sh, the part of the `make run` recipe that picks the workspace."""
    return subprocess.run(
        [REPO / "scripts/run-workspace.sh"],
        env={"PATH": os.environ["PATH"], "HOME": str(home), **env},
        capture_output=True,
        text=True,
        timeout=10,
    )


def run_workspace(home: Path, **env: str) -> tuple[str, str]:
    """The workspace `make run` chooses, and what it says about it."""
    r = workspace_script(home, **env)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip(), r.stderr


@pytest.fixture
def dirs(tmp_path):
    home = tmp_path.resolve() / "home"
    project = home / "project"
    project.mkdir(parents=True)
    return home, project


def test_make_run_serves_the_directory_it_was_called_from(dirs):
    home, project = dirs
    chosen, said = run_workspace(home, CALLER_DIR=str(project))
    assert chosen == str(project) and "the directory make was called from" in said


def test_make_run_workspace_argument_wins(dirs, tmp_path):
    home, project = dirs
    chosen, _ = run_workspace(home, WORKSPACE="~/project", CALLER_DIR=str(tmp_path))
    assert chosen == str(project)


def test_make_run_reads_a_relative_workspace_from_the_callers_directory(dirs):
    home, project = dirs
    chosen, _ = run_workspace(home, WORKSPACE="project", CALLER_DIR=str(home))
    assert chosen == str(project)


@pytest.mark.parametrize("caller", ["checkout", "inside the checkout", "above it", "home"])
def test_make_run_never_serves_the_checkout_or_the_home(dirs, caller):
    home, _ = dirs
    where = {
        "checkout": REPO,
        "inside the checkout": REPO / "src",
        "above it": REPO.parent,
        "home": home,
    }[caller]
    chosen, said = run_workspace(home, CALLER_DIR=str(where))
    assert chosen == str(home / "agentvisor-workspace") and Path(chosen).is_dir()
    assert "make run WORKSPACE=DIR" in said


def test_make_run_refuses_a_workspace_that_is_not_a_directory(dirs):
    home, _ = dirs
    r = workspace_script(home, WORKSPACE="~/missing")
    assert r.returncode == 1 and r.stdout == ""
    assert f"WORKSPACE={home}/missing is not a directory" in r.stderr
