"""Where agentvisor finds the programs it runs on the host (bwrap, ldd, ...).

Only in the system's own directories, never through the caller's ``PATH``: a ``PATH``
entry may be relative (``.venv/bin``, ``node_modules/.bin``) or inside a workspace, where
a sandboxed command can write a program of that name, which the host would then run with
the caller's rights. The exec helper and the gateway serve many callers: a lookup that
depends on none of their environments gives every caller the same program.

A PATH-style walk by hand rather than `shutil.which`: shutil costs milliseconds to import
on every `agentvisor exec`, and the lookup needs nothing of it.
"""

from __future__ import annotations

import os

# Root-owned on every distribution, and mounted read-only (or not at all) in sandboxes.
PROGRAM_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")


def find(name: str) -> str | None:
    """The absolute path of the program ``name`` in the system directories, or None."""
    if not name or "/" in name:
        raise ValueError(f"a program name, not a path: {name!r}")
    for directory in PROGRAM_DIRS:
        path = os.path.join(directory, name)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    return None
