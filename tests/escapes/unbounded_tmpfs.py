# Every writable place outside the workspace is a size-limited tmpfs: find a mount that takes
# files without a size of its own (bwrap's /dev was one: half the machine's memory), or a
# scratch tmpfs that takes 2 GiB. Never writes more than 1 MiB per place: reserving is the test.
import os

workspace = os.getcwd()
for line in open("/proc/self/mounts"):
    _, where, kind, options = line.split()[:4]
    if where == workspace or where.startswith(workspace + "/") or "rw" not in options.split(","):
        continue
    path = os.path.join(where, ".probe-unbounded")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as e:
        print("blocked:", where, e.strerror)
        continue
    try:
        os.posix_fallocate(fd, 0, 2 << 30)
        print("ESCAPED: reserved 2 GiB in", where, kind)
    except OSError as e:
        print("blocked:", where, "2 GiB:", e.strerror)
    finally:
        os.close(fd)
        os.unlink(path)
print("probe-ran")
