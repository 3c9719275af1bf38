#!/bin/sh
# Prints the workspace `make run` serves, and says on stderr why it was chosen:
#   1. $WORKSPACE (make run WORKSPACE=DIR), which must exist; relative to the caller's directory;
#   2. else $CALLER_DIR, the directory make was called from (GNU make keeps the caller's $PWD
#      under `make -C`), unless it is this checkout, inside it or around it, or the home
#      directory: the agent must not write agentvisor's own code (the host runs it) nor the
#      home's dotfiles (the user's shell runs them);
#   3. else ~/agentvisor-workspace, created when missing.
set -eu
checkout=$(cd "$(dirname "$0")/.." && pwd -P)

if [ -n "${WORKSPACE:-}" ]; then
    # `make run WORKSPACE=~/x` from a shell that does not expand the ~ after the =.
    case $WORKSPACE in "~") WORKSPACE=$HOME ;; "~/"*) WORKSPACE=$HOME/${WORKSPACE#"~/"} ;; esac
    # A relative path means what it meant where make was called, not in this checkout.
    case $WORKSPACE in /*) ;; *) WORKSPACE=${CALLER_DIR:-.}/$WORKSPACE ;; esac
    if [ ! -d "$WORKSPACE" ]; then
        echo "make run: WORKSPACE=$WORKSPACE is not a directory" >&2
        exit 1
    fi
    workspace=$(cd "$WORKSPACE" && pwd -P)
    echo "make run: workspace $workspace (WORKSPACE)" >&2
    echo "$workspace"
    exit 0
fi

caller=$(cd "${CALLER_DIR:-/}" 2>/dev/null && pwd -P || echo /)
home=$(cd "${HOME:-/}" 2>/dev/null && pwd -P || echo /)
case $caller/ in
    "$checkout"/*|"$home"/) ;;
    *)
        case $checkout/ in
            "${caller%/}"/*) ;;
            *)
                echo "make run: workspace $caller (the directory make was called from)" >&2
                echo "$caller"
                exit 0
                ;;
        esac
        ;;
esac

fallback=${HOME:?make run: HOME is not set; use make run WORKSPACE=DIR}/agentvisor-workspace
mkdir -p "$fallback"
echo "make run: workspace $fallback (choose another: make run WORKSPACE=DIR)" >&2
echo "$fallback"
