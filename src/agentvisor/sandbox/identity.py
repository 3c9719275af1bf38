"""Who a sandbox runs as on the host: never uid 0.

A user namespace does not change a process's host identity: a root caller's sandbox,
mapped 0 -> 0 with every capability dropped, still owns every root-owned file, among
them the host-global ``/proc/sys`` (``kernel/core_pattern`` runs a program as root on
the host). So a root caller's sandbox runs as an unprivileged host uid:

- the workspace's owner, when that is not root (files it writes belong to the owner);
- otherwise the system user ``agentvisor-sandbox`` when it exists, else ``nobody``; the
  workspace (and every writable mount owned by someone else) is then shown to it through
  an idmapped mount (``idmap.py``), so it can write there and files stay root's on disk.

A caller that is not root runs its sandboxes as itself, as before.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping

from ..errors import SandboxError
from ..records import Declared

DEDICATED_USER = "agentvisor-sandbox"
NOBODY = 65534
SETPRIV = "/usr/bin/setpriv"


class SandboxUser(Declared):
    uid: int
    gid: int
    why: str  # how it was chosen, for `agentvisor doctor` and error messages

    @property
    def switches(self) -> bool:
        """True when the sandbox runs as someone other than this process."""
        return self.uid != os.getuid()

    def describe(self) -> str:
        return f"uid {self.uid}, gid {self.gid}: {self.why}"


def sandbox_user(workspace: str | os.PathLike[str]) -> SandboxUser:
    """The host identity of sandboxes on ``workspace`` started by this process."""
    if os.getuid() != 0:
        return SandboxUser(os.getuid(), os.getgid(), "the caller (not root)")
    info = os.stat(workspace)
    if info.st_uid != 0:
        return SandboxUser(
            info.st_uid,
            _unprivileged_gid(info.st_uid, info.st_gid),
            "the workspace owner (the caller is root; sandboxes never run as host uid 0)",
        )
    return dedicated_user()


def dedicated_user() -> SandboxUser:
    try:
        entry = pwd.getpwnam(DEDICATED_USER)
    except KeyError:
        return SandboxUser(
            NOBODY,
            NOBODY,
            f"nobody (the caller is root and the workspace belongs to root; create the "
            f"system user {DEDICATED_USER} to give sandboxes a uid of their own)",
        )
    return SandboxUser(
        entry.pw_uid,
        _unprivileged_gid(entry.pw_uid, entry.pw_gid),
        f"the system user {DEDICATED_USER} (the caller is root and the workspace belongs to root)",
    )


def _unprivileged_gid(uid: int, gid: int) -> int:
    if gid != 0:
        return gid
    try:
        primary = pwd.getpwuid(uid).pw_gid
    except KeyError:
        return NOBODY
    return primary if primary != 0 else NOBODY


def switch_argv(user: SandboxUser) -> list[str]:
    """The prefix that starts a program as ``user`` (no supplementary groups). setpriv,
    an exec rather than code between fork and exec, keeps `subprocess` on vfork."""
    if not user.switches:
        return []
    if not os.access(SETPRIV, os.X_OK):
        raise SandboxError(
            f"{SETPRIV} (util-linux) is missing: it starts a root caller's sandbox as "
            f"the unprivileged uid {user.uid}"
        )
    return [SETPRIV, f"--reuid={user.uid}", f"--regid={user.gid}", "--clear-groups", "--"]


def view_of(sources: Mapping[str, str], path: str) -> str:
    """Where a launcher takes ``path`` from: inside the idmapped view of its directory
    when there is one (``sources``: host directory -> view)."""
    for host, view in sorted(sources.items(), key=lambda item: -len(item[0])):
        if path == host or path.startswith(host + "/"):
            return view + path[len(host) :]
    return path
