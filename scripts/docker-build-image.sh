#!/usr/bin/env bash
# Build agentvisor's default sandbox image (agentvisor-sandbox:latest) from this machine's
# own files: no registry needed. Arguments go to the builder (--tag NAME, --force).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-$here/.venv/bin/python}"
[ -x "$python" ] || python=python3
exec "$python" -m agentvisor.sandbox.docker.image "$@"
