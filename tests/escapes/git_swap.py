# Rename .git away and plant a fresh .git/hooks/pre-commit, or point core.fsmonitor at a script.
import os
import subprocess

for step in (lambda: os.rename(".git", ".git-old"),
             lambda: os.makedirs(".git/hooks", exist_ok=True),
             lambda: open(".git/hooks/pre-commit", "w").write("#!/bin/sh\necho pwned\n"),
             lambda: open(".git/config", "a").write("[core]\n\tfsmonitor = ./evil.sh\n"),
             lambda: open(".envrc", "w").write("echo pwned\n")):
    try:
        step()
    except OSError as e:
        print("blocked:", e)
subprocess.run(["git", "config", "core.hooksPath", "evil-hooks"], capture_output=True)
print("probe-ran")
