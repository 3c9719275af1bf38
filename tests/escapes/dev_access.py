# Look for host block devices and kernel interfaces.
import os

for path in ("/dev/sda", "/dev/vda", "/dev/nvme0n1", "/dev/mem", "/dev/kmsg", "/sys/kernel", "/dev/fuse"):
    if os.path.exists(path):
        try:
            open(path, "rb").read(1)
            print("ESCAPED: read", path)
        except OSError as e:
            print("blocked:", path, e)
print("probe-ran")
