"""Issue 13.3: programs agentvisor runs on the host come from the system directories,
never from a PATH entry a sandboxed command could have written to."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentvisor import hostprogs
from tests.conftest import AGENTVISOR, requires_bwrap

pytestmark = requires_bwrap


def plant_fake_bwrap(ws, marker):
    """From inside the sandbox, as a command could: `bwrap` in the workspace's `bin/` and
    `.venv/bin/`, writing ``marker`` (a host path outside the workspace) when run."""
    fake = f"#!/bin/sh\necho planted > {marker}\nexit 1\n"
    script = (
        'for d in bin .venv/bin; do mkdir -p $d && printf %s "$0" > $d/bwrap'
        " && chmod +x $d/bwrap; done"
    )
    r = subprocess.run(
        [AGENTVISOR, "exec", "--", "sh", "-c", script, fake],
        cwd=ws,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert (ws / ".venv" / "bin" / "bwrap").read_text() == fake


@pytest.fixture
def hostile_path(tmp_path):
    """A caller whose PATH starts with the workspace's bin/ and a relative .venv/bin."""
    ws = tmp_path / "ws"
    ws.mkdir()
    marker = tmp_path / "host-marker"
    plant_fake_bwrap(ws, marker)
    path = os.pathsep.join([str(ws / "bin"), ".venv/bin", "", os.environ["PATH"]])
    return ws, marker, dict(os.environ, PATH=path)


def test_exec_never_runs_a_bwrap_from_path(hostile_path):
    ws, marker, env = hostile_path
    r = subprocess.run(
        [AGENTVISOR, "exec", "--", "echo", "sandboxed"],
        cwd=ws,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (r.returncode, r.stdout) == (0, "sandboxed\n"), r.stderr
    r = subprocess.run(
        [AGENTVISOR, "exec", "--dry-run", "--", "true"], cwd=ws, env=env, capture_output=True
    )
    # The command line runs the system's bwrap (behind setpriv/prlimit for a root caller),
    # never a program from the caller's PATH.
    programs = [word for word in r.stdout.split() if word.startswith(b"/") and b"/ws/" not in word]
    assert hostprogs.find("bwrap").encode() in programs
    assert not any(word.startswith(str(ws).encode()) for word in r.stdout.split()[:8])
    r = subprocess.run([AGENTVISOR, "doctor"], cwd=ws, env=env, capture_output=True, text=True)
    assert f"ok bubblewrap {hostprogs.find('bwrap')} (" in " ".join(r.stdout.split())
    assert not marker.exists()
    # Control: a PATH lookup from there finds the planted program, which then runs.
    subprocess.run(["bwrap", "--version"], cwd=ws, env=env)
    assert marker.read_text() == "planted\n"


def test_programs_come_from_system_directories(tmp_path, monkeypatch):
    found = hostprogs.find("bwrap")
    assert found is not None and os.path.dirname(found) in hostprogs.PROGRAM_DIRS
    assert hostprogs.find("no-such-program-here") is None
    for name in ("", "bin/bwrap", "/usr/bin/bwrap", "../bwrap"):
        with pytest.raises(ValueError):
            hostprogs.find(name)
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\n")
    monkeypatch.setenv("PATH", str(tmp_path))
    fake.chmod(0o755)
    assert hostprogs.find("bwrap") == found  # PATH plays no part


def test_the_docker_image_build_runs_the_system_ldd(tmp_path, monkeypatch):
    """`python -m agentvisor.sandbox.docker.image` (as root) finds libraries with ldd: the
    system's, not one a sandboxed command wrote to a workspace's .venv/bin on PATH."""
    from agentvisor.sandbox.docker import image

    marker = tmp_path / "host-marker"
    planted = tmp_path / "ws" / ".venv" / "bin"
    planted.mkdir(parents=True)
    (planted / "ldd").write_text(f"#!/bin/sh\necho planted > {marker}\n")
    (planted / "ldd").chmod(0o755)
    monkeypatch.setenv("PATH", os.pathsep.join([str(planted), os.environ["PATH"]]))
    libs = image.shared_libraries([Path("/bin/sh")])
    assert any("libc.so" in lib.name for lib in libs)
    assert not marker.exists()
    # Control: a PATH lookup runs the planted one.
    subprocess.run(["ldd", "/bin/sh"], capture_output=True)
    assert marker.read_text() == "planted\n"


def test_the_image_build_script_imports_nothing_from_the_current_directory(tmp_path):
    """scripts/docker-build-image.sh, run (as root) from a workspace where a sandboxed command
    planted an agentvisor/ package: `python -m` would import it from the current directory."""
    ws = tmp_path / "ws"
    (ws / "agentvisor").mkdir(parents=True)
    marker = tmp_path / "host-marker"
    (ws / "agentvisor" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    script = Path(__file__).resolve().parents[2] / "scripts" / "docker-build-image.sh"
    # No engine answers here: the build stops after the import, which is what is tested.
    env = {**os.environ, "PYTHON": sys.executable, "DOCKER_HOST": f"unix://{tmp_path}/none"}
    subprocess.run([str(script), "--tag", "x"], cwd=ws, env=env, capture_output=True, timeout=60)
    assert not marker.exists()
    # Control: `python -m` from there imports the planted package.
    subprocess.run([sys.executable, "-m", "agentvisor.sandbox.docker.image", "--help"], cwd=ws,
                   env=env, capture_output=True, timeout=60)  # fmt: skip
    assert marker.read_text() == "ran"
