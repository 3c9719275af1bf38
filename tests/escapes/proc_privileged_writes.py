# Writes to /proc files that need a privilege the sandbox must not have (as a root caller it
# ran as host uid 0 once): lower its own OOM score, map uids, change its LSM label, reach the
# keyrings; and any writable file under /sys or /proc/sys, found by walking them.
import ctypes
import os


def write(path, value):
    try:
        with open(path, "w") as f:
            f.write(value)
        return True
    except OSError:
        return False


if write("/proc/self/oom_score_adj", "-1000"):
    print("ESCAPED: oom_score_adj lowered to -1000")
for path, value in (("/proc/self/uid_map", "0 0 1"), ("/proc/self/setgroups", "allow")):
    if write(path, value):
        print("ESCAPED: wrote", path)
libc = ctypes.CDLL(None, use_errno=True)
if libc.syscall(250, 1, None) >= 0:  # keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL)
    print("ESCAPED: joined a new session keyring")
writable = []
for top in ("/proc/sys", "/sys"):
    for directory, dirs, files in os.walk(top):
        if directory.count("/") > 6:
            dirs[:] = []
        for name in files:
            path = os.path.join(directory, name)
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                writable.append(path)
            except OSError:
                pass
print("ESCAPED: writable " + " ".join(writable[:5]) if writable else "blocked: /proc/sys, /sys")
print("probe-ran")
