#!/usr/bin/env bash
# Install the system packages agentvisor needs, only those that are missing.
# Runs as root, or through sudo when available; otherwise says what to install.
set -euo pipefail

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
# No `grep -q`: it stops reading early, ldconfig dies of SIGPIPE, and pipefail fails the test.
ldconfig -p 2>/dev/null | grep 'libseccomp\.so\.2' >/dev/null || need+=(libseccomp2)
command -v python3 >/dev/null 2>&1 || need+=(python3 python3-venv)
python3 -c 'import ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
command -v ip >/dev/null 2>&1 || need+=(iproute2)
# Extra packages a caller asks for (e.g. the test suite's services): EXTRA_PACKAGES="a b".
for pkg in ${EXTRA_PACKAGES:-}; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done

[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "agentvisor needs these packages: ${need[*]}" >&2
  echo "install them as root (apt-get install ${need[*]}) and run this again" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "no apt-get here; install these by hand: ${need[*]}" >&2
  exit 1
fi
echo "installing system packages: ${need[*]}"
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
