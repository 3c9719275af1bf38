"""The real path under load (``gateway_load.py --real``): `agentvisor serve` as a process,
MCP over HTTP with the SDK client, bwrap sandboxes, N agents at once."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import percentile_ms

QUOTA = "the client quota"  # how a refusal by a client quota reads (docs/gateway.md)
CALLS = [
    ("terminal", {"command": "echo hi"}),
    ("read_file", {"path": "notes.txt"}),
    ("write_file", {"path": "out-{i}.txt", "content": "x\n"}),
]


def run_levels(levels: list[int], calls: int, rounds: int = 2, trace: bool = False) -> int:
    print(f"gateway load, real path: MCP over HTTP, bwrap, {os.cpu_count()} cores")
    for sessions in levels:
        with tempfile.TemporaryDirectory(prefix="agentvisor-real-") as tmp:
            level(Path(tmp), sessions, calls, rounds, trace)
    return 0


class MemoryProbe:
    """Asks the gateway, run by _traced_serve.py, for memory reports over two FIFOs."""

    def __init__(self, tmp: Path, trace: bool) -> None:
        self.fifo_in, self.fifo_out = tmp / "probe-in", tmp / "probe-out"
        os.mkfifo(self.fifo_in)
        os.mkfifo(self.fifo_out)
        self.trace = trace
        self.reports: list[str] = []

    def command(self) -> list[str]:
        traced = str(Path(__file__).with_name("_traced_serve.py"))
        mode = "trace" if self.trace else "plain"
        return [sys.executable, traced, mode, str(self.fifo_in), str(self.fifo_out)]

    def ask(self, label: str) -> None:
        self.fifo_in.write_text(label + "\n")
        self.reports.append(self.fifo_out.read_text())


def level(tmp: Path, n_sessions: int, n_calls: int, rounds: int, trace: bool) -> None:
    ws, home = tmp / "ws", tmp / "home"
    ws.mkdir()
    home.mkdir()
    (ws / "notes.txt").write_text("hello\n")
    url = f"sqlite:///{tmp / 'state.db'}"
    config = tmp / "agentvisor.yaml"
    # Every agent here comes from 127.0.0.1, one client to the quotas: lifted to the level,
    # so the figures are the load's, not the refusals' (docs/gateway.md, client quotas).
    config.write_text(
        f"audit:\n  url: {url}\napprovals:\n  timeout: 5\n"
        f"gateway:\n  max_sessions_per_client: {n_sessions}\n"
        f"  max_calls_per_client: {n_sessions}\n"
    )
    port = _free_port()
    env = dict(os.environ, HOME=str(home))
    serve = ["serve", "--config", str(config), "--workspace", str(ws), "--port", str(port)]
    probe = MemoryProbe(tmp, trace)
    proc = subprocess.Popen(
        [*probe.command(), *serve],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    samples: list[tuple[float, int, int]] = []
    stop = threading.Event()
    mcp = f"http://127.0.0.1:{port}/mcp"
    try:
        _wait_port(port)
        fresh = _usage(proc.pid)
        # A warm-up round at the level's concurrency (one call of each tool per session)
        # takes lazy imports and caches into the baseline. Growth past it may still be
        # malloc's (a longer load spreads over more threads' arenas): the rounds and
        # malloc_trim below tell that from memory something holds.
        _agents(mcp, n_sessions, len(CALLS))
        _wait_closed(proc.pid)
        baseline = _usage(proc.pid)
        if trace:
            probe.ask("baseline")
        threading.Thread(target=_sample, args=(proc.pid, samples, stop), daemon=True).start()
        took, results, wall = _agents(mcp, n_sessions, n_calls)
        _wait_closed(proc.pid)  # the clients ended their sessions (DELETE): sandboxes end
        after_close = _usage(proc.pid)
        leftover = _descendants(proc.pid)
        if trace:
            probe.ask("after round 1")
        # The same load again: a leak grows again by about as much each round, memory the
        # allocator kept from round 1 is reused and RSS stays put.
        again = []
        for k in range(2, rounds + 1):
            took_k, results_k, _ = _agents(mcp, n_sessions, n_calls)
            _wait_closed(proc.pid)
            again.append((took_k, results_k, _usage(proc.pid)))
            if trace:
                probe.ask(f"after round {k}")
        probe.ask("trim")
    finally:
        stop.set()
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    after_stop = _processes_under(ws)
    from agentvisor.state import State

    audited = len(State(url).audit.events(kind="call", limit=10**7))
    quota = sum(1 for ok, text in results if not ok and QUOTA in text)
    errors = [text for ok, text in results if not ok and QUOTA not in text]
    print(f"\n{n_sessions} sessions × {n_calls} calls (terminal, read_file, write_file)")
    warm = n_sessions * len(CALLS)
    print(
        f"  calls                 {len(results)} in {wall:.1f} s = {len(results) / wall:.0f}/s;"
        f"  errors {len(errors)}, quota refusals {quota}"
    )
    for text in sorted(set(errors))[:3]:
        print(f"    e.g. {text[:160]!r}")
    print(
        f"  latency               p50 {percentile_ms(took, 50):7.1f} ms   "
        f"p99 {percentile_ms(took, 99):7.1f} ms"
    )
    if samples:
        rss = [r for _, r, _ in samples]
        fds = [f for _, _, f in samples]
        print(
            f"  gateway RSS (MiB)     start {rss[0] / 1024:.0f}  peak {max(rss) / 1024:.0f}  "
            f"end {rss[-1] / 1024:.0f}   ({len(samples)} samples, every 0.5 s)"
        )
        print(f"  gateway open fds      start {fds[0]}  peak {max(fds)}  end {fds[-1]}")
        step = max(1, len(samples) // 10)
        shown = samples[::step]
        t0 = samples[0][0]
        print(
            "  over time (s: MiB/fds) "
            + "  ".join(f"{t - t0:.0f}: {r / 1024:.0f}/{f}" for t, r, f in shown)
        )
    (rss0, fds0), (rss1, fds1) = baseline, after_close
    print(
        f"  after close vs base   RSS {rss0 / 1024:.1f} -> {rss1 / 1024:.1f} MiB "
        f"({(rss1 - rss0) / 1024:+.1f}), fds {fds0} -> {fds1} ({fds1 - fds0:+d})   "
        f"(baseline after a warm-up round of {n_sessions} sessions; before it "
        f"{fresh[0] / 1024:.1f} MiB, {fresh[1]} fds)"
    )
    print(
        f"  left behind           {len(leftover)} processes under the gateway after the "
        f"sessions closed, {len(after_stop)} after it stopped"
    )
    made = len(results) + sum(len(r) for _, r, _ in again)
    print(f"  audit call events     {audited - warm} for {made} calls ({rounds} rounds)")
    before = after_close
    for k, (took_k, results_k, usage) in enumerate(again, start=2):
        errors_k = sum(1 for ok, text in results_k if not ok and QUOTA not in text)
        print(
            f"  after round {k} vs {k - 1}    RSS {before[0] / 1024:.1f} -> {usage[0] / 1024:.1f} "
            f"MiB ({(usage[0] - before[0]) / 1024:+.1f}), fds {before[1]} -> {usage[1]} "
            f"({usage[1] - before[1]:+d})   (the same {len(results_k)} calls again, "
            f"{errors_k} errors, p50 {percentile_ms(took_k, 50):.1f} ms)"
        )
        before = usage
    # What malloc_trim gives back was free memory glibc's malloc kept, not memory held.
    print("  " + probe.reports[-1].strip())
    if trace:
        print("  memory probe (tracemalloc in the gateway, --trace-memory):")
        for report in probe.reports[:-1]:
            print("    " + report.rstrip().replace("\n", "\n    "))


def _agents(url: str, n_sessions: int, n_calls: int) -> tuple[list[float], list[Any], float]:
    import anyio
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    took: list[float] = []
    results: list[tuple[bool, str]] = []

    async def agent(i: int) -> None:
        try:
            # Closed with the agent: its keep-alive connections would count as the gateway's fds.
            async with (
                httpx2.AsyncClient(timeout=120) as http,
                Client(streamable_http_client(url, http_client=http), mode="legacy") as c,
            ):
                for n in range(n_calls):
                    tool, template = CALLS[n % len(CALLS)]
                    args = {k: v.replace("{i}", str(i)) for k, v in template.items()}
                    start = time.perf_counter()
                    result = await c.call_tool(tool, args)
                    took.append(time.perf_counter() - start)
                    text = "".join(getattr(p, "text", None) or "" for p in result.content)
                    results.append((not result.is_error, text))
        except Exception as exc:  # a failed session counts as errors, the run goes on
            results.append((False, f"session failed: {exc!r}"))

    async def main() -> float:
        start = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(n_sessions):
                tg.start_soon(agent, i)
        return time.perf_counter() - start

    wall = anyio.run(main)
    return took, results, wall


def _usage(pid: int) -> tuple[int, int]:
    """The process's RSS (KiB) and open descriptors."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1])
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def _wait_closed(pid: int, timeout: float = 60.0) -> None:
    """Until the gateway has no sandbox left (its children) and its descriptors settle."""
    deadline = time.monotonic() + timeout
    last = -1
    while time.monotonic() < deadline:
        fds = _usage(pid)[1]
        if not _descendants(pid) and fds == last:
            return
        last = fds
        time.sleep(1.0)


def _sample(pid: int, out: list[tuple[float, int, int]], stop: threading.Event) -> None:
    while not stop.is_set():
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            rss = int(
                next(line for line in status.splitlines() if line.startswith("VmRSS")).split()[1]
            )
            fds = len(os.listdir(f"/proc/{pid}/fd"))
        except (OSError, StopIteration):
            return
        out.append((time.monotonic(), rss, fds))
        stop.wait(0.5)


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
                parents[int(entry)] = int(fields[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        found += children
        frontier += children
    return found


def _processes_under(ws: Path) -> list[int]:
    """Processes whose command line names the workspace (bwrap binds it)."""
    mine = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if str(ws).encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    mine.append(int(entry))
            except OSError:
                continue
    return mine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_port(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("agentvisor serve did not start")
