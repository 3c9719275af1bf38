"""Overhead of the docker backend, against a raw bwrap `true` measured in the same run.

Prints the median of each and its ratio to raw bwrap:
- raw bwrap: `bwrap` with namespaces, --cap-drop ALL and a read-only root, spawned directly;
- docker, persistent: `true` started with exec in a session's container that is already
  running (the container is checked again before each command, as in real use);
- docker, fresh: a whole container per command (create, start, check, exec, remove), what
  `agentvisor exec --backend docker` does.
Needs a running Docker engine and the default image (scripts/docker-build-image.sh).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import RAW_BWRAP, interleaved, median_ms

from agentvisor.config import SandboxConfig
from agentvisor.sandbox.docker import DockerBackend
from agentvisor.sandbox.env import build_env

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 20


def main() -> None:
    cfg = SandboxConfig(backend="docker")
    env = build_env(os.environ, home=str(Path.home())).env
    with tempfile.TemporaryDirectory(prefix="agentvisor-bench-") as ws:
        fresh = DockerBackend(cfg, Path(ws), env, Path.home())
        session = DockerBackend(
            cfg.model_copy(update={"persistent": True}),
            Path(ws),
            env,
            Path.home(),
            session=f"bench-{os.getpid()}",
        )
        try:
            cases = {
                "raw bwrap": lambda: subprocess.run(RAW_BWRAP, check=True),
                "docker, persistent": lambda: session.run(["true"]),
                "docker, fresh": lambda: fresh.run(["true"]),
            }
            results = interleaved(cases, RUNS)
        finally:
            session.close()
    raw = median_ms(results["raw bwrap"])
    print(f"docker backend overhead, {RUNS} runs each, interleaved (medians)")
    for name, times in results.items():
        med = median_ms(times)
        print(f"  {name:<20} {med:8.2f} ms   {med / raw:7.1f}x raw bwrap")


if __name__ == "__main__":
    main()
