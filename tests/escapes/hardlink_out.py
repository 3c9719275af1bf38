# Hard-link a host file (argv[1]) into the workspace, then write through the link.
import os
import sys

try:
    os.link(sys.argv[1], "linked")
    with open("linked", "a") as f:
        f.write("written-from-sandbox\n")
    print("ESCAPED: hard link to a host file")
except OSError as e:
    print("blocked:", e)
print("probe-ran")
