#!/usr/bin/env bash
# Stop the dockerd that scripts/docker-start.sh started (and only that one).
set -uo pipefail

pidfile="${AGENTVISOR_DOCKERD_PIDFILE:-/run/agentvisor-dockerd.pid}"
[ -f "$pidfile" ] || exit 0
pid="$(cat "$pidfile")"
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
  echo "docker: stopping dockerd ($pid)"
  kill "$pid"
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
fi
rm -f "$pidfile"
