# Write through a symlink planted in the workspace that points at a host file (argv[1]).
import os
import sys

try:
    os.symlink(sys.argv[1], "to-host")
    with open("to-host", "a") as f:
        f.write("written-from-sandbox\n")
    print("wrote through the link (inside the sandbox's own view)")
except OSError as e:
    print("blocked:", e)
print("probe-ran")
