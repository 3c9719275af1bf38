"""A size-limited file system for a changeset's overlay layers (``sandbox.disk_mb``).

Every write of a session's sandbox lands in its changeset's upper directory, so bounding
that directory bounds what the session writes to the workspace. The layers live on an
ext4 file system in a sparse image file in the changeset's own directory, loop-mounted
by the (root) gateway: a write past its size fails in the sandbox with ENOSPC.

An image on disk rather than a tmpfs of that size: the changeset must survive a killed
gateway or a reboot with the agent's pending writes (a person applies or discards them
later). The mount outlives a killed gateway; after a reboot the first reader of the
changeset mounts the image again (`mount`). Sparse, so only what is written takes space.

The system's own mkfs.ext4, mount and umount (agentvisor.hostprogs): a file system is
not something to write by hand, and no Python library mounts one.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from .. import hostprogs
from ..errors import LimitNotEnforced

MIB = 1024 * 1024
# Below this much room the layers count as full: a write that failed with ENOSPC leaves
# at most a few blocks free, and what it wrote last may be cut short.
FULL_BELOW_BYTES = MIB
# Mount options: nothing in an agent's writes is a device or gains privileges.
MOUNT_OPTIONS = "loop,nosuid,nodev"


def create(image: Path, size_bytes: int) -> None:
    """Make ``image``: a sparse file of ``size_bytes`` holding an empty ext4."""
    with open(image, "xb") as f:
        os.fchmod(f.fileno(), 0o600)
        f.truncate(size_bytes)
    # -m 0: no blocks reserved for root (the sandbox may write as root); quiet, forced
    # (the target is a file, not a block device).
    _run("mkfs.ext4", "-q", "-F", "-m", "0", str(image))


def mount(image: Path, target: Path) -> None:
    """Mount ``image`` on ``target`` unless it already is (after a reboot it is not)."""
    if os.path.ismount(target):
        return
    target.mkdir(mode=0o700, exist_ok=True)
    _run("mount", "-o", MOUNT_OPTIONS, str(image), str(target))


def unmount(target: Path) -> None:
    """Detach ``target`` (lazily: a sandbox still ending may hold it a moment longer)."""
    if os.path.ismount(target):
        _run("umount", "-l", str(target))


def full(target: Path) -> bool:
    """Whether the file system at ``target`` has (nearly) no room left."""
    st = os.statvfs(target)
    return st.f_bavail * st.f_frsize < FULL_BELOW_BYTES


def _run(name: str, *args: str) -> None:
    program = hostprogs.find(name)
    if program is None:
        raise LimitNotEnforced(
            f"sandbox.disk_mb: cannot be enforced here: {name} is not installed "
            "(e2fsprogs, util-linux)"
        )
    done = subprocess.run([program, *args], capture_output=True, text=True, cwd="/", check=False)
    if done.returncode != 0:
        raise LimitNotEnforced(
            f"sandbox.disk_mb: {name} {' '.join(args)} failed: "
            f"{(done.stderr or done.stdout).strip()}"
        )
