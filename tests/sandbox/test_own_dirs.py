"""Issue 13.3: agentvisor's own directories (operator config, trust pins, exec socket) in a
workspace cannot be created, replaced or moved aside by a sandboxed command.

The workspace is the home directory (`cd ~ && agentvisor exec ...`) or the caller's
``XDG_CONFIG_HOME``/``XDG_RUNTIME_DIR`` point into it. A planted ``config.yaml`` there is
the *operator's* config, which is trusted: ``sandbox.backend: local`` would run the next
command on the host without a sandbox.
"""

from __future__ import annotations

import os
import sys

from tests.conftest import requires_bwrap, run_cli

pytestmark = requires_bwrap

# Written by the sandboxed command: plant an operator config at each given directory
# (creating it, or after moving its parent aside), print what happened.
PLANT = """
import os, sys
for target in sys.argv[1:]:
    parent = os.path.dirname(target)
    try:
        os.rename(parent, parent + ".old")
        print("moved", parent)
    except OSError as e:
        print("kept", parent, e.strerror)
    try:
        os.makedirs(target, exist_ok=True)
        with open(os.path.join(target, "config.yaml"), "w") as f:
            f.write("sandbox:\\n  backend: local\\n")
        print("planted", target)
    except OSError as e:
        print("blocked", target, e.strerror)
"""

UNSANDBOXED = "sandbox.backend is 'local'"


def plant(home, env, *targets, backend="bwrap"):
    (home / "plant.py").write_text(PLANT)
    args = ["--backend", backend] if backend != "bwrap" else []
    r = run_cli(
        "exec", *args, "--", sys.executable if backend == "local" else "python3",
        "plant.py", *targets, cwd=home, env=env,
    )  # fmt: skip
    return r.stdout + r.stderr


def next_run(home, env):
    r = run_cli("exec", "--", "id", "-u", cwd=home, env=env)
    return r.stdout + r.stderr


def home_env(home, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    return {**env, "HOME": str(home), **extra}


def test_a_workspace_that_is_home_cannot_plant_the_operator_config(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = home_env(home)
    # The cache holds the defaults a run without a config file uses, and the seccomp filter.
    out = plant(home, env, ".config/agentvisor", ".local/state/agentvisor", ".cache/agentvisor")
    assert "planted" not in out and "moved" not in out, out
    assert not (home / ".config" / "agentvisor" / "config.yaml").exists()
    assert UNSANDBOXED not in next_run(home, env)


def test_an_existing_config_dir_cannot_be_moved_aside(tmp_path):
    home = tmp_path / "home"
    (home / ".config" / "agentvisor").mkdir(parents=True)
    (home / ".config" / "agentvisor" / "config.yaml").write_text("# the operator's\n")
    env = home_env(home)
    out = plant(home, env, ".config/agentvisor")
    assert "moved" not in out and "planted" not in out, out
    assert (home / ".config" / "agentvisor" / "config.yaml").read_text() == "# the operator's\n"
    assert UNSANDBOXED not in next_run(home, env)


def test_xdg_dirs_pointing_into_the_workspace(tmp_path):
    home = tmp_path / "home"
    ws = tmp_path / "ws"
    home.mkdir()
    ws.mkdir()
    env = home_env(home, XDG_CONFIG_HOME=str(ws / "cfg"), XDG_RUNTIME_DIR=str(ws / "run"))
    out = plant(ws, env, "cfg/agentvisor", "run/agentvisor")
    assert "planted" not in out and "moved" not in out, out
    assert not (ws / "cfg" / "agentvisor" / "config.yaml").exists()
    assert UNSANDBOXED not in next_run(ws, env)


def test_control_a_planted_operator_config_is_obeyed(tmp_path):
    """The probe works: without a sandbox it plants, and the next run obeys the file."""
    home = tmp_path / "home"
    home.mkdir()
    env = home_env(home)
    assert "planted .config/agentvisor" in plant(home, env, ".config/agentvisor", backend="local")
    assert UNSANDBOXED in next_run(home, env)


REWRITE = "open('ops.yaml', 'w').write('sandbox:\\n  backend: local\\n')\n"


def rewrite_config(ws, *backend):
    (ws / "ops.yaml").write_text("sandbox:\n  timeout: 60\n")
    (ws / "rewrite.py").write_text(REWRITE)
    python = sys.executable if backend else "python3"
    for config in ("ops.yaml", str(ws / "ops.yaml")):  # relative and absolute --config
        run_cli("exec", "--config", config, *backend, "--", python, "rewrite.py", cwd=ws)
    r = run_cli("exec", "--config", "ops.yaml", "--", "id", "-u", cwd=ws)
    return r.stdout + r.stderr


def test_a_config_file_in_the_workspace_stays_read_only(workspace):
    assert UNSANDBOXED not in rewrite_config(workspace)
    assert (workspace / "ops.yaml").read_text() == "sandbox:\n  timeout: 60\n"


def test_control_a_rewritten_config_file_is_obeyed(workspace):
    assert UNSANDBOXED in rewrite_config(workspace, "--backend", "local")
