#!/usr/bin/env bash
# Usage: scripts/test.sh [CTEST_ARGS...]
#
# Builds herd and runs every test: installs what is missing, builds, checks
# the C++ formatting (when clang-format is installed) and that no #include
# crosses a layer (scripts/check_layers.py), and runs ctest. Extra arguments go
# to ctest, e.g. scripts/test.sh -L unit, scripts/test.sh -R allreduce.
# Exits with ctest's status, or 1 when only the formatting or layer check failed.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
herd_handle_help "$@"

scripts/install_deps.sh

# Formatting first, as it takes a second; its verdict is given at the end.
format_ok=1
if command -v clang-format >/dev/null 2>&1; then
  unformatted=()
  while IFS= read -r source; do
    if ! clang-format --style=file --dry-run -Werror "$source" >/dev/null 2>&1; then
      unformatted+=("$source")
    fi
  done < <(herd_cxx_sources)
  if [[ ${#unformatted[@]} -gt 0 ]]; then
    format_ok=0
  fi
else
  echo "test: clang-format not installed; skipping the formatting check"
fi
# The layers as well; this verdict too comes at the end.
layers_ok=1
layer_crossings="$(scripts/check_layers.py 2>&1 >/dev/null)" || layers_ok=0

scripts/build.sh

# Unit tests run side by side; multi-rank tests reserve 2 slots each
# (PROCESSORS 2), so with -j2 they run one at a time.
ctest_status=0
ctest --test-dir "$HERD_BUILD_DIR" --output-on-failure -j2 "$@" || ctest_status=$?

if [[ $format_ok -eq 0 ]]; then
  echo "test: these files are not formatted as .clang-format says:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  echo "test: fix them with scripts/format.sh" >&2
fi
if [[ $layers_ok -eq 0 ]]; then
  echo "test: these includes cross a layer (the layers are in docs/architecture.md):" >&2
  printf '%s\n' "$layer_crossings" >&2
fi
if [[ $ctest_status -ne 0 ]]; then
  exit "$ctest_status"
fi
[[ $format_ok -eq 1 && $layers_ok -eq 1 ]]
