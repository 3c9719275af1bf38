"""Programs planted in PATH directories the workspace controls never run on the host, for any
program name agentvisor (or what it starts: the exec helper, the egress proxy, doctor) might
look up, and through any front end a user runs next from the workspace."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.conftest import AGENTVISOR, requires_bwrap

pytestmark = requires_bwrap

NAMES = [
    "bwrap",
    "python3",
    "python",
    "git",
    "docker",
    "ldd",
    "setpriv",
    "prlimit",
    "unshare",
    "nsenter",
    "mount",
    "umount",
    "id",
    "sh",
    "bash",
    "env",
    "getent",
    "ip",
    "newuidmap",
    "newgidmap",
    "systemd-run",
    "xdg-open",
    "chromium",
    "ps",
    "kill",
]
DIRS = ("bin", ".venv/bin", "node_modules/.bin")
RUNS = (
    ["exec", "--", "true"],
    ["exec", "--network", "proxy", "--", "true"],
    ["doctor"],
    ["check", "exec", "git status"],
    ["changes"],
)


def test_no_planted_program_runs_on_the_host(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    marks = tmp_path / "marks"
    marks.mkdir()
    plant = "".join(
        f"mkdir -p {d}; printf '#!/bin/sh\\necho ran > {marks}/{name}\\nexit 1\\n' > {d}/{name}; "
        f"chmod +x {d}/{name}; "
        for d in DIRS
        for name in NAMES
    )
    (ws / "plant.sh").write_text(plant)
    env = dict(os.environ, AGENTVISOR_NO_GATEWAY="1")
    r = subprocess.run(
        [AGENTVISOR, "exec", "--", "sh", "plant.sh"], cwd=ws, env=env, capture_output=True
    )
    assert r.returncode == 0, r.stderr
    path = os.pathsep.join([*(str(ws / d) for d in DIRS), *DIRS, "", os.environ["PATH"]])
    hostile = dict(os.environ, PATH=path)
    hostile.pop("AGENTVISOR_NO_GATEWAY", None)
    for args in RUNS:
        run = subprocess.run(
            [AGENTVISOR, *args], cwd=ws, env=hostile, capture_output=True, timeout=120
        )
        assert run.returncode == 0, (args, run.stderr)
    assert sorted(p.name for p in marks.iterdir()) == []
    # Control: a PATH lookup from there finds the planted programs, which then run.
    subprocess.run(["git", "--version"], cwd=ws, env=hostile, capture_output=True)
    assert (marks / "git").read_text() == "ran\n"
