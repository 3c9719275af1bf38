"""Small helpers shared by the benchmark scripts: the raw bwrap baseline, timing and printing
medians side by side."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from agentvisor import hostprogs

# The baseline every sandbox figure is a ratio of: bwrap alone, spawned directly, with
# namespaces, no capabilities and a read-only root.
RAW_BWRAP = [
    hostprogs.find("bwrap") or "bwrap",
    *("--ro-bind", "/", "/", "--unshare-all", "--unshare-user", "--cap-drop", "ALL"),
    *("--die-with-parent", "--new-session", "--dev", "/dev", "--proc", "/proc", "true"),
]


def sample(fn: Callable[[], object], runs: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def interleaved(cases: dict[str, Callable[[], object]], runs: int) -> dict[str, list[float]]:
    """Alternate the cases run by run, so a noisy neighbour hits them all alike."""
    for fn in cases.values():
        for _ in range(3):
            fn()
    out: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(runs):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            out[name].append(time.perf_counter() - start)
    return out


def median_ms(times: list[float]) -> float:
    return statistics.median(times) * 1000


def percentile_ms(times: list[float], p: float) -> float:
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] * 1000
