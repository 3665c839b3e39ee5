#!/usr/bin/env bash
# Usage: scripts/format.sh
#
# Formats every C++ source of the project in place with clang-format and the
# repository's .clang-format.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
herd_handle_help "$@"

if ! command -v clang-format >/dev/null 2>&1; then
  echo "format: clang-format not found; install it with: apt-get install -y clang-format" >&2
  exit 1
fi
mapfile -t sources < <(herd_cxx_sources)
clang-format -i --style=file "${sources[@]}"
echo "format: formatted ${#sources[@]} files with $(clang-format --version)"
