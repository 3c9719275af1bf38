"""What changesets cost: `auto` mode against `direct`, side by side in one run.

Prints medians (ms) and the auto/direct ratio (target: <= 1.5x) for
- a sandboxed `true` through the gateway (`terminal` tool, persistent session sandbox);
- a small edit (`echo >> file`), which in `auto` is then scanned, judged and applied;
- starting a session's sandbox (auto mounts the overlay first);
then the time to settle (scan, classify, apply) a changeset against the number of changed
files, and against the size of the workspace for a fixed 10 changed files (it must grow
with the changes, not with the workspace).

    .venv/bin/python benchmarks/changeset_overhead.py [RUNS]
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import interleaved, median_ms

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 30


def allow(path: str) -> tuple[bool, str | None]:
    return True, None


def gateways(root: Path) -> tuple[object, object]:
    from agentvisor.approvals import ApprovalBroker
    from agentvisor.config import config_from_dict
    from agentvisor.gateway import Gateway
    from agentvisor.state.events import SQLiteAuditLog

    made = []
    for mode in ("auto", "direct"):
        ws = root / f"ws-{mode}"
        ws.mkdir()
        (ws / "file.txt").write_text("start\n")
        cfg = config_from_dict({"approvals": {"timeout": 5}, "workspace": {"mode": mode}})
        gateway = Gateway(
            cfg,
            workspace=ws,
            broker=ApprovalBroker(cfg, channels=[], grants=None),
            audit=SQLiteAuditLog(root / f"audit-{mode}.db"),
        )
        made.append(gateway)
    return made[0], made[1]


def calls(root: Path) -> None:
    auto, direct = gateways(root)
    sessions = {g: g.open_session(toolsets=["all"]) for g in (auto, direct)}  # type: ignore[attr-defined]

    def call(gateway: object, command: str) -> object:
        return gateway.call(sessions[gateway], "terminal", {"command": command})  # type: ignore[attr-defined]

    times = interleaved(
        {
            "true auto": lambda: call(auto, "true"),
            "true direct": lambda: call(direct, "true"),
            "edit auto": lambda: call(auto, "echo x >> file.txt"),
            "edit direct": lambda: call(direct, "echo x >> file.txt"),
        },
        RUNS,
    )
    for what in ("true", "edit"):
        a, d = median_ms(times[f"{what} auto"]), median_ms(times[f"{what} direct"])
        print(
            f"{what:5} via the gateway: auto {a:7.2f} ms   direct {d:7.2f} ms   ratio {a / d:.2f}x"
        )

    def start(gateway: object) -> None:
        session = gateway.open_session(toolsets=["all"])  # type: ignore[attr-defined]
        session.sandbox()
        gateway.close_session(session)  # type: ignore[attr-defined]

    starts = interleaved({"auto": lambda: start(auto), "direct": lambda: start(direct)}, 10)
    a, d = median_ms(starts["auto"]), median_ms(starts["direct"])
    print(f"session sandbox start: auto {a:7.2f} ms   direct {d:7.2f} ms   ratio {a / d:.2f}x")
    for gateway in (auto, direct):
        gateway.close()  # type: ignore[attr-defined]


def settle_time(root: Path, workspace_files: int, changed: int) -> float:
    """ms to settle ``changed`` new files over a workspace of ``workspace_files`` files."""
    from agentvisor.changes import Changesets

    ws = Path(tempfile.mkdtemp(dir=root))
    for i in range(workspace_files):
        directory = ws / f"d{i // 500}"
        directory.mkdir(exist_ok=True)
        (directory / f"f{i}.txt").write_text("x" * 100)
    changesets = Changesets(ws, root=root / "state")
    session = changesets.start(f"s-{workspace_files}-{changed}")
    (session.upper / "new").mkdir()
    for i in range(changed):
        (session.upper / "new" / f"c{i}.txt").write_text("y" * 1000)
    started = time.perf_counter()
    changesets.settle(session, allow)
    return (time.perf_counter() - started) * 1000


def settles(root: Path) -> None:
    for changed in (1, 10, 100, 1000):
        print(
            f"settle {changed:5} changed files (workspace 1000 files): "
            f"{settle_time(root, 1000, changed):8.2f} ms"
        )
    for size in (0, 1000, 10000, 50000):
        print(
            f"settle    10 changed files (workspace {size:5} files): "
            f"{settle_time(root, size, 10):8.2f} ms"
        )


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        home = root / "home"
        home.mkdir()
        os.environ["HOME"] = str(home)
        calls(root)
        settles(root)


if __name__ == "__main__":
    main()
