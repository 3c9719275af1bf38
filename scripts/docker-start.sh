#!/usr/bin/env bash
# Make a Docker engine available for the docker backend's tests.
#
# Uses a running engine when there is one. Otherwise installs docker.io when dockerd is
# missing (through install-system-deps.sh) and starts dockerd with no bridge network and
# no iptables rules (the sandbox containers have no network anyway), recording its pid so
# scripts/docker-stop.sh ends exactly that process. When no engine can run here (no root,
# no cgroups, inside an unprivileged container), it says so loudly and exits 0: the docker
# tests then skip with a banner instead of failing the rest of the suite.
set -uo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
pidfile="${AGENTVISOR_DOCKERD_PIDFILE:-/run/agentvisor-dockerd.pid}"
log="${AGENTVISOR_DOCKERD_LOG:-/tmp/agentvisor-dockerd.log}"
socket="/var/run/docker.sock"

engine_up() {  # the engine answers /_ping on its socket (no docker CLI needed)
  [ -S "$socket" ] && python3 - "$socket" <<'PY'
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(3)
try:
    s.connect(sys.argv[1])
    s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
    sys.exit(0 if b"200 OK" in s.recv(1024) else 1)
except OSError:
    sys.exit(1)
PY
}

say_skipped() {
  echo "!!!!!!!! docker backend tests will be SKIPPED: $1" >&2
  exit 0
}

if [ -n "${DOCKER_HOST:-}" ] || engine_up; then
  echo "docker: using the running engine"
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  EXTRA_PACKAGES="docker.io" "$here/install-system-deps.sh" || say_skipped "docker.io could not be installed"
  engine_up && { echo "docker: the package started the engine"; exit 0; }
fi
[ "$(id -u)" -eq 0 ] || say_skipped "starting dockerd needs root (or start Docker yourself)"

echo "docker: starting dockerd (log: $log)"
dockerd --bridge=none --iptables=false --ip6tables=false --pidfile "$pidfile" \
  >"$log" 2>&1 &
for _ in $(seq 1 60); do
  if engine_up; then
    echo "docker: engine ready"
    exit 0
  fi
  if ! kill -0 $! 2>/dev/null; then
    tail -5 "$log" >&2
    say_skipped "dockerd exited at start (see $log)"
  fi
  sleep 0.5
done
say_skipped "dockerd did not answer within 30 s (see $log)"
