#!/usr/bin/env bash
# Usage: scripts/demo.sh [--] [DEMO_ARGS...]
#
# herd's main job: installs what is missing, builds, and runs the allreduce
# demo on 2 ranks through herdrun (HERD_DEMO_RANKS for another count). Extra
# arguments go to the demo, e.g.
#   scripts/demo.sh --dtype bfloat16 --op average --elements 65536
#   scripts/demo.sh -- --help     (the demo's options, after the build)
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
herd_handle_help "$@"
if [[ "${1:-}" == -- ]]; then shift; fi

scripts/install_deps.sh
scripts/build.sh

exec "$HERD_BUILD_DIR/launcher/herdrun" -np "${HERD_DEMO_RANKS:-2}" \
  "$HERD_BUILD_DIR/examples/allreduce_demo" "$@"
