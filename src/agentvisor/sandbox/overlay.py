"""Mounts a session's changeset over the workspace, then becomes bubblewrap.

    python3 -I -S overlay.py WORKSPACE UPPER WORK REPORT_FD [LOWER] -- bwrap ARGS...

bubblewrap 0.8 has no ``--overlay`` and bwrap offers no hook between its namespace setup
and the command (which runs with every capability dropped), so this small step runs
first: it enters a new user and mount namespace (the user keeps its own uid and gid),
mounts overlayfs with the workspace as the lower layer and the changeset as the upper
layer *on the workspace path itself*, hands an ``O_PATH`` descriptor of that view to
the gateway over ``REPORT_FD`` (its host-side file tools read and write through the
same mount, so the agent sees one consistent view), and executes bwrap, which builds
the sandbox from this namespace and so binds the overlay where the workspace was.
Nothing is ever written to the real workspace: every write lands in UPPER.

Standalone on purpose: run by the gateway's interpreter with ``-I -S`` before any
sandbox exists; it may import nothing but the standard library.
"""

from __future__ import annotations

import _socket  # the C module: `socket` (enum, selectors) costs every run milliseconds
import ctypes
import os
import sys

TYPE_CHECKING = False  # importing typing would cost every sandbox start milliseconds
if TYPE_CHECKING:
    from typing import NoReturn

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18


def fail(message: str) -> NoReturn:
    os.write(2, f"agentvisor overlay: {message}\n".encode())
    os._exit(125)


def check(result: int, what: str) -> None:
    if result != 0:
        fail(f"{what}: {os.strerror(ctypes.get_errno())}")


def write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def enter_namespaces(libc: ctypes.CDLL) -> None:
    uid, gid = os.getuid(), os.getgid()
    check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare")
    write_file("/proc/self/setgroups", "deny")
    write_file("/proc/self/uid_map", f"{uid} {uid} 1")
    write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    # Private, so the mount below never propagates back to the host's namespace.
    check(libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None), "make / private")


def mount_overlay(libc: ctypes.CDLL, workspace: str, upper: str, work: str, lower: str) -> None:
    for path in (lower, upper, work):
        if any(c in path for c in ",:\\"):
            fail(f"{path}: a path with ',', ':' or '\\' cannot be an overlay layer")
    options = f"lowerdir={lower},upperdir={upper},workdir={work},userxattr"
    check(
        libc.mount(b"overlay", workspace.encode(), b"overlay", 0, options.encode()),
        f"mount the changeset over {workspace} (overlayfs in a user namespace needs Linux "
        "5.11 or later and a file system with user xattrs for the changeset; "
        "workspace.mode: direct works without it)",
    )


def report_view(workspace: str, report_fd: int) -> None:
    view = os.open(workspace, os.O_PATH | os.O_DIRECTORY)
    channel = _socket.socket(fileno=report_fd)
    fd_bytes = view.to_bytes(4, sys.byteorder)  # one C int, as SCM_RIGHTS wants it
    channel.sendmsg([b"view"], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fd_bytes)])
    channel.close()
    os.close(view)


def main() -> None:
    # LOWER: where the workspace is read from when that is not its own path (a root
    # caller's sandbox user reads and writes it through an idmapped view, sandbox/idmap.py).
    args = sys.argv[1:]
    split = args.index("--") if "--" in args else -1
    layers, command = args[:split], args[split + 1 :]
    if split < 0 or len(layers) not in (4, 5) or not command:
        fail("usage: overlay.py WORKSPACE UPPER WORK REPORT_FD [LOWER] -- COMMAND...")
    workspace, upper, work, report_fd = layers[:4]
    lower = layers[4] if len(layers) == 5 else workspace
    libc = ctypes.CDLL(None, use_errno=True)
    enter_namespaces(libc)
    mount_overlay(libc, workspace, upper, work, lower)
    report_view(workspace, int(report_fd))
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
