# Attach to another process with ptrace, and read another process's memory.
import ctypes

libc = ctypes.CDLL(None, use_errno=True)
if libc.ptrace(16, 1, 0, 0) == 0:  # PTRACE_ATTACH to pid 1
    print("ESCAPED: ptrace attach succeeded")
try:
    open("/proc/1/mem", "rb").read(1)
except OSError as e:
    print("blocked mem:", e)
print("probe-ran")
