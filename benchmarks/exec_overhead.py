"""Overhead of running `true` in the sandbox, against a raw bwrap run measured in the same run.

Prints the median of each and its ratio to raw bwrap:
- raw bwrap: `bwrap` with namespaces, --cap-drop ALL and a read-only root, spawned directly;
- Python API: `Sandbox(config).run(["true"])` (full agentvisor sandbox: mounts, seccomp,
  cgroup limits, clean environment);
- CLI: `.venv/bin/agentvisor exec -- true` as a new process each time, as a user runs it
  (the first run leaves an exec helper that serves the next ones), with a gateway running
  (`agentvisor serve`, which then runs the command for the CLI), and all in-process
  (`AGENTVISOR_NO_GATEWAY=1`: every run loads config, policy and sandbox itself).
Targets (issue 2): Python API <= 2x raw bwrap, CLI <= 10x raw bwrap.
Then what the run's changeset costs (`workspace.mode: auto`, the default, against `direct`),
through the exec helper and all in-process: `true`, and a small edit (applied by the settle).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import RAW_BWRAP, interleaved, median_ms

from agentvisor.sandbox import Sandbox

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 40
CLI = str(Path(sys.executable).with_name("agentvisor"))


@contextlib.contextmanager
def gateway(ws: str, runtime: str):
    """`agentvisor serve` with its exec socket in ``runtime``."""
    env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [CLI, "serve", "--port", str(port), "--workspace", ws], env=env, stderr=subprocess.DEVNULL
    )
    sock = Path(runtime, "agentvisor", "exec.sock")
    deadline = time.monotonic() + 60
    while not sock.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    try:
        yield env
    finally:
        proc.terminate()
        proc.wait(10)


def main() -> None:
    with (
        tempfile.TemporaryDirectory(prefix="agentvisor-bench-") as ws,
        tempfile.TemporaryDirectory(prefix="agentvisor-run-") as runtime,
    ):
        sandbox = Sandbox(workspace=ws)
        alone = dict(os.environ, AGENTVISOR_NO_GATEWAY="1")
        raw = lambda: subprocess.run(RAW_BWRAP, check=True)  # noqa: E731
        # Two phases, each against raw bwrap measured beside it: a CLI start between two API
        # runs would evict the caches the API run is measured with, and a gateway idling
        # beside it would take CPU from it.
        api = interleaved({"raw bwrap": raw, "Python API": lambda: sandbox.run(["true"])}, RUNS)
        with gateway(ws, runtime) as served, exec_helper() as helped:
            cli = interleaved(
                {
                    "raw bwrap": raw,
                    "CLI exec (exec helper)": lambda: subprocess.run(
                        [CLI, "exec", "--", "true"], cwd=ws, env=helped, check=True
                    ),
                    "CLI exec (gateway running)": lambda: subprocess.run(
                        [CLI, "exec", "--", "true"], cwd=ws, env=served, check=True
                    ),
                    "CLI exec (all in-process)": lambda: subprocess.run(
                        [CLI, "exec", "--", "true"], cwd=ws, env=alone, check=True
                    ),
                },
                RUNS,
            )
        modes = changeset_costs()
    print(f"exec overhead, {RUNS} runs each, interleaved (medians)")
    for results in (api, cli):
        base = median_ms(results["raw bwrap"])
        for name, times in results.items():
            med = median_ms(times)
            print(f"  {name:<27} {med:7.2f} ms   {med / base:5.2f}x raw bwrap")
    print("workspace.mode auto (a changeset per run) against direct (medians)")
    for name in ("true", "edit"):
        for path in ("exec helper", "all in-process"):
            direct = median_ms(modes[f"{name} {path} direct"])
            auto = median_ms(modes[f"{name} {path} auto"])
            print(
                f"  {name:<4} ({path:<14}): auto {auto:7.2f} ms   direct {direct:7.2f} ms   "
                f"ratio {auto / direct:4.2f}x"
            )


def changeset_costs() -> dict[str, list[float]]:
    """`agentvisor exec` with and without its changeset, side by side."""
    with (
        tempfile.TemporaryDirectory(prefix="agentvisor-bench-") as ws,
        exec_helper() as helped,
    ):
        alone = dict(helped, AGENTVISOR_NO_GATEWAY="1")
        cases = {}
        for mode in ("direct", "auto"):
            config = Path(ws, f"{mode}.yaml")
            config.write_text(f"workspace: {{mode: {mode}}}\n")
            for path, env in (("exec helper", helped), ("all in-process", alone)):
                for name, argv in (("true", ["true"]), ("edit", EDIT)):
                    command = [CLI, "exec", "--config", str(config), "--", *argv]
                    cases[f"{name} {path} {mode}"] = run_in(ws, command, env)
        return interleaved(cases, RUNS)


# A small edit: one file appended to, which auto mode then scans, judges and applies.
EDIT = ["sh", "-c", "echo edit >> notes.txt"]


def run_in(ws: str, command: list[str], env: dict[str, str]):
    return lambda: subprocess.run(command, cwd=ws, env=env, check=True)


@contextlib.contextmanager
def exec_helper():
    """The environment of a user with no gateway: the first exec leaves the helper."""
    with tempfile.TemporaryDirectory(prefix="agentvisor-run-") as runtime:
        env = dict(os.environ, XDG_RUNTIME_DIR=runtime)
        env.pop("AGENTVISOR_NO_GATEWAY", None)
        try:
            yield env
        finally:
            subprocess.run([CLI, "exec-helper", "--stop"], env=env, capture_output=True)


if __name__ == "__main__":
    main()
