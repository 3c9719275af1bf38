# Open host-global kernel files for writing, by every path that reaches them (never writes
# a value: opening for writing is the test), and through a fresh proc of a nested namespace.
import os
import subprocess

TARGETS = [
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/kernel/modprobe",
    "/proc/sys/kernel/panic",
    "/proc/sys/vm/drop_caches",
    "/proc/sys/fs/binfmt_misc/register",
    "/proc/sysrq-trigger",
    "/proc/self/root/proc/sys/kernel/core_pattern",
    "/proc/thread-self/root/proc/sys/kernel/core_pattern",
    "/proc/1/root/proc/sys/kernel/core_pattern",
    "/proc/self/cwd/../../../proc/sys/kernel/core_pattern",
    "/sys/kernel/uevent_helper",
    "/sys/power/state",
    "/sys/kernel/mm/transparent_hugepage/enabled",
    "/proc/irq/default_smp_affinity",
    "/proc/sys/net/ipv4/ip_forward",
]


def try_open(path):
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError as e:
        return f"blocked: {path} {e.strerror}"
    os.close(fd)
    return f"ESCAPED: {path} opened for writing"


for path in TARGETS:
    print(try_open(path))
# A directory fd taken before a path check cannot be reopened writable either.
try:
    d = os.open("/proc/sys/kernel", os.O_RDONLY | os.O_DIRECTORY)
    fd = os.open("core_pattern", os.O_WRONLY, dir_fd=d)
    os.close(fd)
    print("ESCAPED: core_pattern opened for writing through a dir fd")
except OSError as e:
    print("blocked: dir fd", e.strerror)
# A nested user and pid namespace with a proc of its own (no read-only /proc/sys there).
nested = (
    "import os\n"
    "os.makedirs('/tmp/p', exist_ok=True)\n"
    "try:\n"
    "    os.system('mount -t proc proc /tmp/p 2>/dev/null')\n"
    "    fd = os.open('/tmp/p/sys/kernel/core_pattern', os.O_WRONLY)\n"
    "    print('ESCAPED: core_pattern writable in a nested proc')\n"
    "except OSError as e:\n"
    "    print('blocked: nested proc', e.strerror)\n"
)
try:
    r = subprocess.run(
        ["unshare", "-Urpfm", "python3", "-c", nested], capture_output=True, text=True, timeout=10
    )
    print(r.stdout.strip() or f"blocked: unshare {r.returncode} {r.stderr.strip()[:80]}")
except OSError as e:
    print("blocked: unshare", e)
print("probe-ran")
