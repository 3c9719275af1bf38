"""The seccomp profile of docker-backend containers: an allowlist, stricter than Docker's.

Docker's default profile applies only when a container names no profile, and it still
lets io_uring (which runs syscalls out of the filter's reach), ptrace and
``name_to_handle_at``-style calls through on some engine versions. agentvisor therefore
always passes its own profile, built here the same way Docker builds its default: refuse
by default (EPERM), allow a list of ordinary syscalls, and constrain ``clone``,
``clone3``, ``personality`` and ``socket`` by their arguments. The allowlist contains
only syscalls Docker's default also allows to a container without capabilities, minus
`agentvisor.sandbox.seccomp.DENIED_SYSCALLS`; tests/docker checks on a real engine
that no syscall Docker's default refuses gets through this profile.

Only the native architecture is listed, so 32-bit system-call entry points (int 0x80)
are refused too.
"""

from __future__ import annotations

import errno
import json
import os
from typing import Any

from ..seccomp import CLONE_NAMESPACE_FLAGS, DENIED_SYSCALLS

# Syscalls a capability-less container may make under Docker's default profile, by name.
_ORDINARY_NAMES = """
accept accept4 access adjtimex alarm bind brk capget capset chdir chmod chown chown32
clock_adjtime clock_adjtime64 clock_getres clock_getres_time64 clock_gettime clock_gettime64
clock_nanosleep clock_nanosleep_time64 close close_range connect copy_file_range creat dup
dup2 dup3 epoll_create epoll_create1 epoll_ctl epoll_ctl_old epoll_pwait epoll_pwait2
epoll_wait epoll_wait_old eventfd eventfd2 execve execveat exit exit_group faccessat
faccessat2 fadvise64 fadvise64_64 fallocate fanotify_mark fchdir fchmod fchmodat fchown
fchown32 fchownat fcntl fcntl64 fdatasync fgetxattr flistxattr flock fork fremovexattr
fsetxattr fstat fstat64 fstatat64 fstatfs fstatfs64 fsync ftruncate ftruncate64 futex
futex_time64 futimesat getcpu getcwd getdents getdents64 getegid getegid32 geteuid
geteuid32 getgid getgid32 getgroups getgroups32 getitimer getpeername getpgid getpgrp
getpid getppid getpriority getrandom getresgid getresgid32 getresuid getresuid32 getrlimit
get_robust_list getrusage getsid getsockname getsockopt get_thread_area gettid
gettimeofday getuid getuid32 getxattr inotify_add_watch inotify_init inotify_init1
inotify_rm_watch io_cancel ioctl io_destroy io_getevents io_pgetevents io_pgetevents_time64
ioprio_get ioprio_set io_setup io_submit ipc kill lchown lchown32 lgetxattr link linkat
listen listxattr llistxattr _llseek lremovexattr lseek lsetxattr lstat lstat64 madvise
membarrier memfd_create mincore mkdir mkdirat mknod mknodat mlock mlock2 mlockall mmap mmap2
mprotect mq_getsetattr mq_notify mq_open mq_timedreceive mq_timedreceive_time64
mq_timedsend mq_timedsend_time64 mq_unlink mremap msgctl msgget msgrcv msgsnd msync
munlock munlockall munmap nanosleep newfstatat _newselect open openat openat2 pause
pidfd_open pidfd_send_signal pipe pipe2 poll ppoll ppoll_time64 prctl pread64 preadv
preadv2 prlimit64 pselect6 pselect6_time64 pwrite64 pwritev pwritev2 read readahead
readlink readlinkat readv recv recvfrom recvmmsg recvmmsg_time64 recvmsg remap_file_pages
removexattr rename renameat renameat2 restart_syscall rmdir rseq rt_sigaction
rt_sigpending rt_sigprocmask rt_sigqueueinfo rt_sigreturn rt_sigsuspend rt_sigtimedwait
rt_sigtimedwait_time64 rt_tgsigqueueinfo sched_getaffinity sched_getattr sched_getparam
sched_get_priority_max sched_get_priority_min sched_getscheduler sched_rr_get_interval
sched_rr_get_interval_time64 sched_setaffinity sched_setattr sched_setparam
sched_setscheduler sched_yield seccomp select semctl semget semop semtimedop
semtimedop_time64 send sendfile sendfile64 sendmmsg sendmsg sendto setfsgid setfsgid32
setfsuid setfsuid32 setgid setgid32 setgroups setgroups32 setitimer setpgid setpriority
setregid setregid32 setresgid setresgid32 setresuid setresuid32 setreuid setreuid32
setrlimit set_robust_list setsid setsockopt set_thread_area set_tid_address setuid
setuid32 setxattr shmat shmctl shmdt shmget shutdown sigaltstack signalfd signalfd4
sigprocmask sigreturn socketcall socketpair splice stat stat64 statfs statfs64 statx
symlink symlinkat sync sync_file_range syncfs sysinfo tee tgkill time timer_create
timer_delete timer_getoverrun timer_gettime timer_gettime64 timer_settime timer_settime64
timerfd_create timerfd_gettime timerfd_gettime64 timerfd_settime timerfd_settime64 times
tkill truncate truncate64 ugetrlimit umask uname unlink unlinkat utime utimensat
utimensat_time64 utimes vfork vmsplice wait4 waitid waitpid write writev
"""
_ORDINARY = _ORDINARY_NAMES.split()

# personality(2) values Docker's default allows: query, and the harmless compat flags.
_PERSONALITY = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)
AF_VSOCK = 40

_ARCHES = {
    "x86_64": (["SCMP_ARCH_X86_64"], ["arch_prctl", "modify_ldt"]),
    "aarch64": (["SCMP_ARCH_AARCH64"], []),
}


def allowed_syscalls() -> list[str]:
    denied = set(DENIED_SYSCALLS)
    return [name for name in _ORDINARY if name not in denied]


def profile(machine: str | None = None) -> dict[str, Any]:
    """The profile as Docker's JSON structure, for ``--security-opt seccomp=...``."""
    machine = machine or os.uname().machine
    arches, extra = _ARCHES.get(machine, ([], []))
    namespaces = 0
    for flag in CLONE_NAMESPACE_FLAGS:
        namespaces |= flag
    clone_arg = 1 if machine.startswith("s390") else 0
    rules = [
        {"names": sorted(allowed_syscalls() + extra), "action": "SCMP_ACT_ALLOW"},
        # clone without any namespace flag (namespaces need capabilities anyway).
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ALLOW",
            "args": [
                {"index": clone_arg, "value": namespaces, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
            ],
        },
        # clone3 hides its flags in memory: ENOSYS makes libc fall back to clone.
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
        {
            "names": ["socket"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": AF_VSOCK, "valueTwo": 0, "op": "SCMP_CMP_NE"}],
        },
    ]
    rules += [
        {
            "names": ["personality"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": value, "valueTwo": 0, "op": "SCMP_CMP_EQ"}],
        }
        for value in _PERSONALITY
    ]
    return {
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": errno.EPERM,
        "architectures": arches,
        "syscalls": rules,
    }


def profile_json(machine: str | None = None) -> str:
    return json.dumps(profile(machine), separators=(",", ":"), sort_keys=True)
