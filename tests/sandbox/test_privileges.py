"""No privileges: no capabilities, no_new_privs, a new session and the seccomp filter."""

from __future__ import annotations

import pytest

from agentvisor.sandbox.seccomp import TIOCSTI
from tests.conftest import is_root, requires_bwrap
from tests.sandbox.helpers import py_inside, py_outside, sandbox, text

pytestmark = requires_bwrap

STATUS = """
lines = open("/proc/self/status").read().splitlines()
f = {k: v.strip() for k, _, v in (line.partition(":") for line in lines)}
print(f["CapEff"], f["CapBnd"], f["NoNewPrivs"], f["Seccomp"])
"""


def test_no_capabilities_no_new_privs_seccomp(workspace):
    cap_eff, cap_bnd, nnp, seccomp = text(py_inside(workspace, STATUS)).split()
    assert int(cap_eff, 16) == 0
    assert int(cap_bnd, 16) == 0
    assert nnp == "1"
    assert seccomp == "2"  # filter mode
    host_eff, _, host_nnp, host_seccomp = py_outside(STATUS).stdout.split()
    assert host_nnp == "0" or host_seccomp != "2"  # control: the host process is not confined
    if is_root:
        assert int(host_eff, 16) != 0  # control: a root caller has capabilities outside


SYSCALL = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
rc = libc.syscall({nr}, {args})
print("OK" if rc >= 0 else "ERR", os.strerror(ctypes.get_errno()))
"""

# x86_64 numbers; each call is harmless when it succeeds on the host.
CASES = {
    "io_uring_setup": (425, "4, ctypes.create_string_buffer(120)"),
    "unshare_newuser": (272, "0x10000000"),
    "unshare_newns": (272, "0x00020000"),
    "keyctl_get_keyring": (250, "0, -3, 0"),  # KEYCTL_GET_KEYRING_ID(session)
    "userfaultfd": (323, "0"),
    "perf_event_open": (298, "ctypes.create_string_buffer(128), 0, -1, -1, 0"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_seccomp_refuses(workspace, name):
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("syscall numbers in this test are for x86_64")
    nr, args = CASES[name]
    out = text(py_inside(workspace, SYSCALL.format(nr=nr, args=args)))
    assert out.startswith("ERR"), out
    assert "Operation not permitted" in out


def test_seccomp_control_local_backend_allows_unshare(workspace):
    """Control: without the filter (local backend) the same probe succeeds as root."""
    if not is_root:
        pytest.skip("unprivileged unshare may be disabled on the host")
    out = (
        sandbox(workspace, backend="local")
        .run(["python3", "-c", SYSCALL.format(nr=272, args="0x10000000")])
        .stdout.decode()
    )
    assert out.startswith("OK"), out


def test_clone_with_namespace_flag_refused(workspace):
    probe = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
pid = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)  # clone(CLONE_NEWUSER|SIGCHLD)
if pid == 0:
    os._exit(0)
print("OK" if pid > 0 else "ERR", os.strerror(ctypes.get_errno()))
"""
    out = text(py_inside(workspace, probe))
    assert out.startswith("ERR") and "Operation not permitted" in out, out


def test_mount_refused(workspace):
    probe = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("/tmp/m", exist_ok=True)
rc = libc.mount(b"none", b"/tmp/m", b"tmpfs", 0, None)
print("OK" if rc == 0 else "ERR", os.strerror(ctypes.get_errno()))
"""
    assert text(py_inside(workspace, probe)).startswith("ERR")


def test_tiocsti_refused_even_with_high_bits(workspace):
    probe = f"""
import ctypes, os, pty
libc = ctypes.CDLL(None, use_errno=True)
master, slave = pty.openpty()
for request in ({TIOCSTI}, {TIOCSTI} | (1 << 32)):
    rc = libc.ioctl(slave, ctypes.c_ulong(request), ctypes.c_char_p(b"x"))
    print("OK" if rc == 0 else "ERR", os.strerror(ctypes.get_errno()))
"""
    lines = text(py_inside(workspace, probe)).split("\n")
    assert lines[0].startswith("ERR Operation not permitted"), lines
    assert lines[1].startswith("ERR Operation not permitted"), lines


def _open_tty_under_a_terminal(workspace, backend: str) -> str:
    """Run a /dev/tty probe from a child whose controlling terminal is a fresh pty."""
    import os
    import pty

    probe = "try:\n open('/dev/tty', 'w'); print('TTY')\nexcept OSError as e: print('notty', e)"
    pid, fd = pty.fork()
    if pid == 0:
        try:
            result = sandbox(workspace, backend=backend).run(["python3", "-c", probe])
            os.write(1, b"@@" + result.stdout + b"@@")
        finally:
            os._exit(0)
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    return out.decode(errors="replace")


def test_new_session_has_no_controlling_terminal(workspace):
    assert "TTY" in _open_tty_under_a_terminal(workspace, "local")  # control
    assert "notty" in _open_tty_under_a_terminal(workspace, "bwrap")
