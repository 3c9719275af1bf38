#!/bin/sh
# Third-party MCP servers that tests/upstreams runs behind the gateway, from their registries:
# the reference filesystem server from npm, at a pinned version, into build/upstream-servers.
# (The Python one, mcp-server-time, comes from PyPI with the test extra.) Idempotent.
set -eu
cd "$(dirname "$0")/.."
FS_VERSION=2026.8.31
DEST=build/upstream-servers
MAIN="$DEST/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
if [ -f "$MAIN" ] && grep -q "\"version\": \"$FS_VERSION\"" \
    "$DEST/node_modules/@modelcontextprotocol/server-filesystem/package.json"; then
  exit 0
fi
command -v npm >/dev/null || { echo "npm is missing: apt-get install -y npm" >&2; exit 1; }
mkdir -p "$DEST"
npm install --silent --no-audit --no-fund --prefix "$DEST" \
  "@modelcontextprotocol/server-filesystem@$FS_VERSION"
test -f "$MAIN"
