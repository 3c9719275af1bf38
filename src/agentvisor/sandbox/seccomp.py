"""The seccomp filter every sandboxed process runs under, built with libseccomp.

The filter allows by default and refuses what a tool never needs: kernel attack
surface (io_uring, bpf, perf, userfaultfd, keyrings), looking into other processes
(ptrace, process_vm_*, pidfd_getfd), changing the mount or namespace layout (mount, pivot_root,
setns, unshare/clone with namespace flags) and terminal injection (TIOCSTI).

Building the filter costs tens of milliseconds (libseccomp through ctypes), so the
compiled BPF is cached under the XDG cache directory, keyed by the rule set, the
architecture and the libseccomp version. The cache directory is itself protected
from every sandbox.
"""

from __future__ import annotations

import errno
import os
import zlib
from pathlib import Path

from .. import paths
from ..errors import SandboxUnavailable

# Syscalls refused outright with EPERM.
DENIED_SYSCALLS: tuple[str, ...] = (
    # io_uring runs syscalls asynchronously, outside the reach of this filter.
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    # Copies another process's file descriptor (a session spawner's control socket).
    "pidfd_getfd",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "setns",
    "open_tree",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    # Opening files by handle bypasses path-based confinement ("shocker").
    "open_by_handle_at",
    "name_to_handle_at",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "lookup_dcookie",
    "nfsservctl",
    "uselib",
    "vhangup",
)

CLONE_NAMESPACE_FLAGS: tuple[int, ...] = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
)
# CLONE_NEWTIME shares its bit with clone()'s exit-signal byte, so only unshare() checks it.
CLONE_NEWTIME = 0x00000080

TIOCSTI = 0x5412
TIOCLINUX = 0x541C


def filter_bpf() -> bytes:
    """The compiled filter for this machine, from the cache when possible."""
    cached = _cache_path()
    try:
        return cached.read_bytes()
    except FileNotFoundError:
        pass
    data = build_bpf()
    paths.write_atomically(cached, data)
    return data


def build_bpf() -> bytes:
    try:
        import pyseccomp as sc
    except (ImportError, OSError) as exc:  # OSError: libseccomp.so.2 missing
        raise SandboxUnavailable(
            f"libseccomp is not usable ({exc}); install the libseccomp2 package"
        ) from exc

    import tempfile

    eperm = sc.ERRNO(errno.EPERM)
    flt = sc.SyscallFilter(defaction=sc.ALLOW)
    for name in DENIED_SYSCALLS:
        try:
            flt.add_rule(eperm, name)
        except (ValueError, OSError):
            continue  # a syscall this architecture does not have
    for flag in (*CLONE_NAMESPACE_FLAGS, CLONE_NEWTIME):
        flt.add_rule(eperm, "unshare", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    for flag in CLONE_NAMESPACE_FLAGS:
        flt.add_rule(eperm, "clone", sc.Arg(_clone_flags_arg(), sc.MASKED_EQ, flag, flag))
    # clone3 passes its flags in memory a filter cannot read: ENOSYS makes libc fall back
    # to clone(2), which the rules above can inspect.
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for request in (TIOCSTI, TIOCLINUX):
        # The kernel reads the request as 32 bits; compare only those so high garbage bits
        # cannot slip past the filter.
        flt.add_rule(eperm, "ioctl", sc.Arg(1, sc.MASKED_EQ, 0xFFFFFFFF, request))
    with tempfile.TemporaryFile() as out:
        flt.export_bpf(out)
        out.seek(0)
        return out.read()


def _clone_flags_arg() -> int:
    # s390 swaps the first two clone() arguments.
    return 1 if os.uname().machine.startswith("s390") else 0


def _cache_path() -> Path:
    # A checksum of the rules names the file, so a changed rule set never reuses a stale filter.
    rules = repr((DENIED_SYSCALLS, CLONE_NAMESPACE_FLAGS, CLONE_NEWTIME, TIOCSTI, TIOCLINUX))
    return paths.cache_dir() / f"seccomp-{zlib.crc32(rules.encode()):08x}-{os.uname().machine}.bpf"
