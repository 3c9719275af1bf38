"""agentvisor's own installation inside a workspace stays out of the agent's reach.

A project virtualenv in the workspace (``.venv`` with agentvisor installed) is where every
later host-side agentvisor process imports from: a ``.pth`` file planted in its
site-packages runs as the caller (root in CI) at the next start of any of them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from agentvisor.errors import ConfigError
from agentvisor.fileguard import FileGuard, GuardRefused
from agentvisor.protected import installation_inside
from tests.conftest import requires_bwrap

SITE = Path(sysconfig.get_paths()["purelib"])
VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A workspace whose .venv runs agentvisor (this installation, linked in by a .pth)."""
    ws = tmp_path / "proj"
    ws.mkdir()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(ws / ".venv")], check=True)
    site = ws / ".venv" / "lib" / VERSION / "site-packages"
    source = Path(__file__).resolve().parents[2] / "src"
    (site / "link.pth").write_text(f"{SITE}\n{source}\n")
    return ws


def plant_and_start(ws: Path, marker: Path, *backend: str) -> str:
    """Plant a .pth from inside a sandbox, then start the project's Python on the host."""
    python = str(ws / ".venv" / "bin" / "python")
    pth = f".venv/lib/{VERSION}/site-packages/zz_planted.pth"
    code = f'import os; open("{marker}", "w").write("ran")'
    r = subprocess.run(
        [
            python,
            "-I",
            "-m",
            "agentvisor",
            "exec",
            *backend,
            "--workspace",
            str(ws),
            "--",
            "sh",
            "-c",
            f"echo '{code}' > {pth}; echo probe-ran",
        ],
        cwd=ws,
        env={"PATH": "/usr/bin:/bin", "AGENTVISOR_NO_GATEWAY": "1", "HOME": str(ws.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    subprocess.run([python, "-I", "-c", "pass"], check=True)
    return r.stdout + r.stderr


@requires_bwrap
def test_a_pth_planted_in_the_workspace_venv_never_runs_on_the_host(project, tmp_path):
    marker = tmp_path / "ran-on-host"
    out = plant_and_start(project, marker)
    assert "probe-ran" in out, out
    assert "Read-only file system" in out, out
    assert not marker.exists()


def test_control_without_the_sandbox_the_planted_pth_runs(project, tmp_path):
    marker = tmp_path / "ran-on-host"
    out = plant_and_start(project, marker, "--backend", "local")
    assert "probe-ran" in out, out
    assert marker.read_text() == "ran"


def test_file_tools_refuse_writes_into_the_installation(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    (ws / "lib").mkdir(parents=True)
    monkeypatch.setattr(sys, "path", [*sys.path, str(ws / "lib")])
    assert installation_inside(str(ws)) == ("lib/",)
    guard = FileGuard(ws)
    with pytest.raises(GuardRefused, match="own installation"):
        guard.write_bytes("lib/sitecustomize.py", b"import os\n")
    guard.write_bytes("elsewhere.py", b"ok\n")  # control: the rest of the workspace is writable
    assert (ws / "elsewhere.py").read_bytes() == b"ok\n"


def test_a_workspace_on_the_import_path_or_in_a_prefix_is_refused(tmp_path, monkeypatch):
    (tmp_path / "ws").mkdir()
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])
    # Below an import path directory (a script's own): only its direct entries import.
    assert installation_inside(str(tmp_path / "ws")) == ()
    with pytest.raises(ConfigError, match="own installation"):
        installation_inside(str(tmp_path))
    with pytest.raises(ConfigError, match="own installation"):
        installation_inside(os.path.join(sys.prefix, "lib"))


SYSTEM_PYTHON = "/usr/bin/python3"
# The CLI as a system-wide or `pip install --user` install runs it: an interpreter outside
# a virtualenv, which runs the user site-packages' .pth files at every start.
SYSTEM_CLI = (
    "import sys; sys.path[:0] = [{src!r}, {site!r}]; "
    "from agentvisor.frontends.cli import main; sys.argv[0] = 'agentvisor'; sys.exit(main())"
)


def system_python_matches() -> bool:
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return False
    out = subprocess.run(
        [SYSTEM_PYTHON, "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
    ).stdout
    return out.strip() == str(sys.version_info[:2])


def plant_user_site_pth(home: Path, marker: Path, *backend: str) -> str:
    """From a sandbox whose workspace is the home directory, plant a .pth in the user
    site-packages; then start the CLI again on the host."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    cli = [SYSTEM_PYTHON, "-c", SYSTEM_CLI.format(src=src, site=str(SITE))]
    env = {"PATH": "/usr/bin:/bin", "AGENTVISOR_NO_GATEWAY": "1", "HOME": str(home)}
    pth = f'import os; open({str(marker)!r}, "w").write("ran")\n'
    plant = (
        "import os\n"
        f"d = '.local/lib/{VERSION}/site-packages'\n"
        "os.makedirs(d, exist_ok=True)\n"
        f"open(d + '/zz_planted.pth', 'w').write({pth!r})\n"
    )
    (home / "plant.py").write_text(plant)
    r = subprocess.run(
        [*cli, "exec", *backend, "--", "python3", "plant.py"],
        cwd=home, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    subprocess.run([*cli, "--version"], cwd=home, env=env, capture_output=True, timeout=60)
    return r.stdout + r.stderr


@requires_bwrap
@pytest.mark.skipif(not system_python_matches(), reason=f"{SYSTEM_PYTHON} is another version")
def test_a_pth_planted_in_the_user_site_never_runs_on_the_host(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "ran-on-host"
    out = plant_user_site_pth(home, marker)
    assert "Read-only file system" in out, out
    assert not marker.exists()


@pytest.mark.skipif(not system_python_matches(), reason=f"{SYSTEM_PYTHON} is another version")
def test_control_without_the_sandbox_the_user_site_pth_runs(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    marker = tmp_path / "ran-on-host"
    plant_user_site_pth(home, marker, "--backend", "local")
    assert marker.read_text() == "ran"
