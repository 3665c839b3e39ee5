#!/usr/bin/env bash
# Usage: scripts/build.sh [CMAKE_ARGS...]
#
# Configures and builds herd into ./build (RelWithDebInfo, Ninja). Extra
# arguments go to the cmake configure step, e.g.
#   scripts/build.sh -DHERD_BUILD_TESTS=OFF
# HERD_BUILD_DIR picks another build folder.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
herd_handle_help "$@"

configure_args=(-S . -B "$HERD_BUILD_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo)
# The generator is fixed when a build folder is first configured.
if [[ ! -f "$HERD_BUILD_DIR/CMakeCache.txt" ]]; then
  configure_args+=(-G Ninja)
fi
cmake "${configure_args[@]}" "$@"
cmake --build "$HERD_BUILD_DIR"
