"""Load on one gateway: 50 concurrent sessions × 100 tool calls, audited on SQLite and on
PostgreSQL. Prints how many calls were audited exactly once (none lost, none doubled),
whether the hash chain verifies, and p50/p99 of decision + audit write per call.

    .venv/bin/python benchmarks/gateway_load.py [--sessions 50] [--calls 100]
                                                [--only sqlite|postgresql] [--pg-url URL]
    .venv/bin/python benchmarks/gateway_load.py --real [--levels 10,50,100,200] [--calls 10]
                                                [--rounds 2] [--trace-memory]

``--real`` measures the real path instead: `agentvisor serve` as a process, MCP over HTTP
(the SDK client, one MCP session per agent), bwrap sandboxes, each agent cycling through
``terminal``, ``read_file`` and ``write_file``. Per level it prints calls/s, p50/p99, the
errors (quota refusals apart; the client quotas are lifted to the level, every agent
coming from 127.0.0.1), the gateway's RSS and open fds over time and after the sessions
closed against a baseline taken after a warm-up round at the level's concurrency (the
allocator's high-water mark is in it), processes left behind once the sessions closed,
audit call events against calls made, then the same load again (``--rounds``, default 2):
RSS "after round k vs k-1" (a leak grows by about as much each round; glibc keeping freed
memory in its per-thread arenas grows less each round), and what ``malloc_trim(0)`` in the
gateway gives back (memory malloc kept, not memory held; docs/gateway.md, sessions).
``--trace-memory`` also runs tracemalloc in the gateway and prints the Python heap's growth
by source line and the object types that grew (slower: the load figures are then the probe's).

The gateway runs in this process (Gateway.call from one thread per session, as the MCP
server's worker threads do) with a tool whose call is decided by the real policy engine
and whose run does nothing, so the figures are the pipeline's own: decision, audit write
(committed before the call returns: SQLite WAL with synchronous=FULL; PostgreSQL with
fsync on), result shaping. PostgreSQL is a throwaway server from the Debian package
(tests/state/pgserver.py) unless --pg-url names one.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import percentile_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=50)
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--only", choices=["sqlite", "postgresql"])
    parser.add_argument("--real", action="store_true", help="the real path (see above)")
    parser.add_argument("--levels", default="10,50,100,200", help="--real: sessions per run")
    parser.add_argument("--rounds", type=int, default=2, help="--real: load rounds per level")
    parser.add_argument(
        "--trace-memory",
        action="store_true",
        help="--real: trace the gateway's memory (tracemalloc, object counts, malloc_trim)",
    )
    parser.add_argument(
        "--pg-url",
        help="an existing PostgreSQL database to use (emptied "
        "tables are not required: the run counts only its own calls)",
    )
    args = parser.parse_args()
    if args.real:
        from gateway_load_real import run_levels

        return run_levels(
            [int(n) for n in args.levels.split(",")], args.calls, args.rounds, args.trace_memory
        )
    print(
        f"gateway load: {args.sessions} sessions × {args.calls} calls, one gateway, "
        f"{os.cpu_count()} cores"
    )
    with tempfile.TemporaryDirectory(prefix="agentvisor-load-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")
        if args.only in (None, "sqlite"):
            both("sqlite", f"sqlite:///{tmp}/audit.db", Path(tmp), args)
        if args.only in (None, "postgresql"):
            if args.pg_url:
                both("postgresql", args.pg_url, Path(tmp), args)
            else:
                from tests.state.pgserver import PgServer, bindir

                if bindir() is None:
                    print("postgresql: skipped (not installed; `make postgres` installs it)")
                    return 0
                server = PgServer(fsync=True).start()
                try:
                    both("postgresql", server.create_database(), Path(tmp), args)
                finally:
                    server.stop()
    return 0


def both(name: str, url: str, tmp: Path, args: argparse.Namespace) -> None:
    """One session alone first (the floor: one commit per call), then the load."""
    run(f"{name}, 1 session × 200 calls", url, tmp / f"{name}-1", 1, 200)
    run(
        f"{name}, {args.sessions} sessions × {args.calls} calls",
        url,
        tmp / f"{name}-n",
        args.sessions,
        args.calls,
    )


def run(name: str, url: str, ws: Path, n_sessions: int, n_calls: int) -> None:
    from agentvisor.actions import Action
    from agentvisor.config import config_from_dict
    from agentvisor.gateway import Gateway, ToolOutput
    from agentvisor.gateway.tools import ToolSpec

    spec = ToolSpec(
        "bench_echo",
        "returns its argument",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
        frozenset({"file"}),
        lambda s, a: [Action("tool", "bench_echo", arguments=a)],
        lambda s, a: ToolOutput(f"echo {a['n']}"),
    )
    config = config_from_dict(
        {
            "audit": {"url": url},
            "toolsets": ["file"],
            "rules": [{"decision": "allow", "kind": "tool", "pattern": "bench_echo"}],
        }
    )
    ws.mkdir()
    gateway = Gateway(config, workspace=ws, extra_tools=[spec])
    timing = threading.local()
    decide, record = gateway.policy.decide, gateway.audit.record

    def timed_decide(*a, **kw):
        start = time.perf_counter()
        try:
            return decide(*a, **kw)
        finally:
            timing.decide = time.perf_counter() - start

    def timed_record(event):
        start = time.perf_counter()
        try:
            return record(event)
        finally:
            if event.kind == "call":
                timing.audit = time.perf_counter() - start

    gateway.policy.decide = timed_decide  # type: ignore[method-assign]
    gateway.audit.record = timed_record  # type: ignore[method-assign]
    sessions = [gateway.open_session(agent=f"load-{i}") for i in range(n_sessions)]
    go = threading.Barrier(n_sessions + 1)
    samples: list[tuple[float, float, float]] = []
    failures: list[str] = []
    lock = threading.Lock()

    def agent(session) -> None:
        mine = []
        go.wait()
        for n in range(n_calls):
            start = time.perf_counter()
            out = gateway.call(session, "bench_echo", {"n": n})
            total = time.perf_counter() - start
            if out.is_error:
                failures.append(out.text)
            mine.append((timing.decide, timing.audit, total))
        with lock:
            samples.extend(mine)

    threads = [threading.Thread(target=agent, args=(s,)) for s in sessions]
    for t in threads:
        t.start()
    go.wait()
    wall = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - wall

    ids = {s.id for s in sessions}
    seen = Counter(
        (e.session, (e.arguments or {})["n"])
        for e in gateway.state.audit.events(kind="call", limit=10**7)
        if e.session in ids and e.tool == "bench_echo"
    )
    expected = n_sessions * n_calls
    once = sum(1 for c in seen.values() if c == 1)
    doubled = sum(1 for c in seen.values() if c > 1)
    verified = gateway.state.audit.verify()
    gateway.close()
    pipeline = [d + a for d, a, _ in samples]
    print(f"\n{name}: {gateway.state.audit.db.shown}")
    print(
        f"  calls made            {len(samples)} ({len(failures)} errors) in {wall:.1f} s "
        f"= {len(samples) / wall:.0f} calls/s"
    )
    print(
        f"  audited exactly once  {once} / {expected}   lost {expected - len(seen)}   "
        f"doubled {doubled}"
    )
    print(
        f"  chain                 {'verifies' if verified.ok else 'BROKEN'}: "
        f"{verified.checked} events"
    )
    print(
        f"  decision + audit      p50 {percentile_ms(pipeline, 50):7.2f} ms   "
        f"p99 {percentile_ms(pipeline, 99):7.2f} ms"
    )
    print(
        f"    decision            p50 {percentile_ms([d for d, _, _ in samples], 50):7.2f}"
        f" ms   p99 {percentile_ms([d for d, _, _ in samples], 99):7.2f} ms"
    )
    print(
        f"    audit write         p50 {percentile_ms([a for _, a, _ in samples], 50):7.2f}"
        f" ms   p99 {percentile_ms([a for _, a, _ in samples], 99):7.2f} ms"
    )
    print(
        f"  whole Gateway.call    p50 {percentile_ms([t for _, _, t in samples], 50):7.2f}"
        f" ms   p99 {percentile_ms([t for _, _, t in samples], 99):7.2f} ms"
    )


if __name__ == "__main__":
    raise SystemExit(main())
