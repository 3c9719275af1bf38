"""The gateway's freed memory goes back to the system once sessions close.

A gateway runs each call in a thread of its own; glibc gives threads their own malloc
arenas (up to 8 per core) and keeps what they free for reuse, fragmented across them. After
a 200-session load that is tens of MiB the gateway no longer uses (the Python heap is back:
benchmarks/gateway_load.py --real). Two arenas bound the spread; a trim after sessions close
returns the rest. glibc only: elsewhere (musl) both are no-ops. By hand through ctypes
because no library wraps mallopt/malloc_trim.
"""

from __future__ import annotations

import ctypes
import os

M_ARENA_MAX = -8  # mallopt's parameter (glibc malloc.h)
ARENAS = 2


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None


def bound_arenas() -> None:
    """Before the gateway's threads start; the operator's MALLOC_ARENA_MAX wins."""
    libc = _glibc()
    if libc is not None and "MALLOC_ARENA_MAX" not in os.environ:
        libc.mallopt(M_ARENA_MAX, ARENAS)


def give_back() -> None:
    """Return the free memory of every arena to the system (milliseconds)."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
