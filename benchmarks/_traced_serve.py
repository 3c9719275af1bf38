"""`agentvisor serve` with a memory probe, for ``gateway_load.py --real --trace-memory``.

    _traced_serve.py trace|plain FIFO_IN FIFO_OUT serve --config ... (the CLI's arguments)

``trace`` starts tracemalloc (slow: figures of such a run are the probe's, not the load's).
A daemon thread reads a label from FIFO_IN and answers on FIFO_OUT with the process's RSS,
its Python heap (tracemalloc) and the growth since the first probe by source line, the live
object counts by type that changed, and its threads. The label ``trim`` runs glibc's
malloc_trim(0) first and reports RSS before and after: memory that comes back is memory the
allocator kept, not memory anything holds. A thread with FIFOs and not a signal handler:
the serve loop may sit in select for long, a Python signal handler would wait for it.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
import tracemalloc
from collections import Counter
from pathlib import Path

FRAMES = 1


def _rss_kib() -> int:
    status = Path("/proc/self/status").read_text()
    return int(next(ln for ln in status.splitlines() if ln.startswith("VmRSS")).split()[1])


def _threads() -> int:
    status = Path("/proc/self/status").read_text()
    return int(next(ln for ln in status.splitlines() if ln.startswith("Threads")).split()[1])


def _types() -> Counter[str]:
    return Counter(type(o).__qualname__ for o in gc.get_objects())


class Probe:
    def __init__(self) -> None:
        self.first: tracemalloc.Snapshot | None = None
        self.first_types: Counter[str] = Counter()

    def report(self, label: str) -> str:
        lines = []
        if label == "trim":
            before = _rss_kib()
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            after = _rss_kib()
            return (
                f"malloc_trim(0): RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB "
                f"({(after - before) / 1024:+.1f})\n"
            )
        gc.collect()
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        current, peak = tracemalloc.get_traced_memory()
        types = _types()
        lines.append(
            f"[{label}] RSS {_rss_kib() / 1024:.1f} MiB, Python heap (tracemalloc) "
            f"{current / 2**20:.1f} MiB (peak {peak / 2**20:.1f}), threads {_threads()}, "
            f"gc objects {sum(types.values())}"
        )
        if self.first is None:
            self.first, self.first_types = snapshot, types
            return "\n".join(lines) + "\n"
        diff = snapshot.compare_to(self.first, "lineno")
        grown = sum(d.size_diff for d in diff)
        lines.append(f"  Python heap since the first probe {grown / 2**20:+.2f} MiB; top lines:")
        for d in sorted(diff, key=lambda d: -d.size_diff)[:8]:
            frame = d.traceback[0]
            lines.append(
                f"    {d.size_diff / 1024:+8.1f} KiB {d.count_diff:+6d} blocks  "
                f"{frame.filename.split('site-packages/')[-1].split('src/')[-1]}:{frame.lineno}"
            )
        changed = (types - self.first_types).most_common(8)
        lines.append("  object types grown: " + ", ".join(f"{t} {n:+d}" for t, n in changed))
        return "\n".join(lines) + "\n"


def _serve_probes(fifo_in: str, fifo_out: str) -> None:
    probe = Probe()
    while True:
        with open(fifo_in) as requests:
            labels = [ln.strip() for ln in requests if ln.strip()]
        for label in labels:
            text = probe.report(label)
            with open(fifo_out, "w") as answers:
                answers.write(text)


def main() -> int:
    mode, fifo_in, fifo_out, *cli = sys.argv[1:]
    if mode == "trace":
        tracemalloc.start(FRAMES)
    threading.Thread(target=_serve_probes, args=(fifo_in, fifo_out), daemon=True).start()
    from agentvisor.frontends.cli import main as cli_main

    sys.argv = ["agentvisor", *cli]
    return int(cli_main() or 0)


if __name__ == "__main__":
    raise SystemExit(main())
