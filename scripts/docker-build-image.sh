#!/usr/bin/env bash
# Build agentvisor's default sandbox image (agentvisor-sandbox:latest) from this machine's
# own files: no registry needed. Arguments go to the builder (--tag NAME, --force).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-$here/.venv/bin/python}"
# Never a python3 found on PATH (a workspace's .venv/bin), and isolated from /: `-m` would
# otherwise import a planted agentvisor/ from the current directory, as root.
[ -x "$python" ] || python=/usr/bin/python3
cd /
exec "$python" -I -m agentvisor.sandbox.docker.image "$@"
