# Signal the sandbox's pid 1 (the session spawner, or bwrap's init) with every signal a
# Python pid 1 would catch by default (SIGINT) or that stops or ends a process, directly and
# through a pidfd; pid 1 must stay running (else the sandbox and everything in it is gone).
import ctypes
import os
import signal
import time

libc = ctypes.CDLL(None, use_errno=True)
for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGSTOP, signal.SIGUSR1):
    try:
        os.kill(1, sig)
    except OSError as e:
        print("blocked: kill", sig, e.strerror)
    pidfd = libc.syscall(434, 1, 0)  # pidfd_open
    if pidfd >= 0:
        libc.syscall(424, pidfd, int(sig), None, 0)  # pidfd_send_signal
        os.close(pidfd)
time.sleep(0.3)
with open("/proc/1/status") as f:
    state = f.read().split("State:")[1].split()[0]
if state in ("T", "t", "Z", "X"):
    print("ESCAPED: pid 1 is", state)
else:
    print("blocked: pid 1 still", state)
os.kill(1, signal.SIGCONT)
print("probe-ran")
