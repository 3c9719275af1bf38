"""The gateway bounds glibc's malloc arenas (its calls run in threads of their own, each
would get an arena, and what they free stays spread over them) and trims after sessions
close. Observed with glibc's own malloc_info in a fresh interpreter, with a control."""

from __future__ import annotations

import subprocess
import sys

import pytest

from agentvisor.gateway import heap

pytestmark = pytest.mark.skipif(heap._glibc() is None, reason="glibc malloc only")

# Threads allocating at once, then how many arenas malloc_info reports (one <heap nr=...>
# element per arena).
PROBE = """
import ctypes, sys, tempfile, threading
from agentvisor.gateway import heap
if sys.argv[1] == "bounded":
    heap.bound_arenas()
barrier = threading.Barrier(8)
def work():
    barrier.wait()
    kept = [bytes(2000) for _ in range(20000)]
    barrier.wait()
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
heap.give_back()
libc = ctypes.CDLL("libc.so.6")
libc.fopen.restype = ctypes.c_void_p
with tempfile.NamedTemporaryFile() as out:
    fp = libc.fopen(out.name.encode(), b"w")
    libc.malloc_info(0, ctypes.c_void_p(fp))
    libc.fclose(ctypes.c_void_p(fp))
    print(open(out.name).read().count("<heap nr="))
"""


def arenas(mode: str) -> int:
    env = {"PATH": "/usr/bin:/bin"}
    r = subprocess.run(
        [sys.executable, "-c", PROBE, mode], env=env, capture_output=True, text=True, check=True
    )
    return int(r.stdout)


def test_the_gateways_threads_share_a_bounded_number_of_arenas():
    assert arenas("bounded") <= heap.ARENAS


def test_control_without_the_bound_threads_spread_over_more_arenas():
    assert arenas("default") > heap.ARENAS
