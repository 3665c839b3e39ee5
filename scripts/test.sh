#!/usr/bin/env bash
# Usage: scripts/test.sh [CTEST_ARGS...]
#
# Builds herd and runs every test: installs what is missing, builds, checks
# the C++ formatting (when clang-format is installed) and that no #include
# crosses a layer (scripts/check_layers.py), and runs ctest. Extra arguments go
# to that ctest, e.g. scripts/test.sh -L unit, scripts/test.sh -R allreduce.
#
# Then two sanitizer stages, each in a build folder of its own next to the
# main one and building only what its tests need (docs/testing.md):
#   ASan+UBSan  ($HERD_BUILD_DIR-asan): the unit tests, the decoders' fuzz
#               tests, and allreduce, grouped, errors and shutdown on 2 ranks
#   TSan        ($HERD_BUILD_DIR-tsan): the in-process threaded unit tests
#               (runtime core and collectives)
# HERD_TEST_SANITIZERS=0 skips them, except under CI=true, where they always
# run. Prints how long each stage took.
# Exits with the main ctest's status, or 1 when only the formatting or layer
# check or a sanitizer stage failed.
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

stage_times=()
# run_stage NAME COMMAND...: runs COMMAND, records its wall time under NAME,
# and returns its status.
run_stage() {
  local name="$1" start=$SECONDS status=0
  shift
  "$@" || status=$?
  stage_times+=("$(printf '%-28s %4d s%s' "$name" $((SECONDS - start)) "$([[ $status -eq 0 ]] || echo ', FAILED')")")
  return "$status"
}

# Functions run by run_stage stop at their first failure by hand: errexit
# does not reach into a command whose status is tested.
main_suite() {
  scripts/build.sh || return
  # Unit tests run side by side; multi-rank tests reserve 2 slots each
  # (PROCESSORS 2), so with -j2 they run one at a time.
  ctest --test-dir "$HERD_BUILD_DIR" --output-on-failure -j2 "$@"
}

# sanitizer_stage KIND DIR TESTS TARGETS...: configures DIR with
# HERD_SANITIZE=KIND (host code, no examples, benchmarks or Python), builds
# TARGETS and runs the tests whose names match the regular expression TESTS.
# The build folder's ctest sets the sanitizers' options and suppressions
# (cmake/sanitize.cmake). -O1 with line tables only compiles in less than
# half the time of -O2 -g, and the reports still name function, file and line.
sanitizer_stage() {
  local kind="$1" dir="$2" tests="$3"
  shift 3
  local configure_args=(-S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DHERD_SANITIZE=$kind"
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
    -DHERD_WITH_CUDA=OFF -DHERD_BUILD_EXAMPLES=OFF -DHERD_BUILD_BENCHMARKS=OFF
    -DHERD_BUILD_PYTHON=OFF)
  if [[ ! -f "$dir/CMakeCache.txt" ]]; then
    configure_args+=(-G Ninja)
  fi
  cmake "${configure_args[@]}" >/dev/null || return
  cmake --build "$dir" --target "$@" || return
  ctest --test-dir "$dir" --output-on-failure -j2 --no-tests=error -R "$tests"
}

ctest_status=0
run_stage "main build and tests" main_suite "$@" || ctest_status=$?

# The sanitizers' tests: every unit test (the collectives' without their
# widest sweeps, tests/CMakeLists.txt), and the multi-rank runs through the
# whole runtime (negotiation, fusion, errors, shutdown) at 2 ranks.
asan_tests='^(test_(common|ops|collectives_short|core|train|api|data|fuzz_message|fuzz_checkpoint|fuzz_recordio)|(allreduce|grouped|errors|shutdown)_np2)$'
asan_targets=(test_common test_ops test_collectives test_core test_train test_api test_data
  test_fuzz_message test_fuzz_checkpoint test_fuzz_recordio test_allreduce test_grouped test_errors
  test_shutdown)
# The threaded tests that run in one process: the background loop and the
# control channel over in-process ranks (test_core), the collectives over the
# in-process and shared-memory transports (test_collectives), the RecordIO
# prefetcher's workers and one file read by several threads (test_data).
tsan_tests='^test_(core|collectives_short|data)$'
tsan_targets=(test_core test_collectives test_data)

sanitizers_ok=1
if [[ "${HERD_TEST_SANITIZERS:-1}" == "0" && "${CI:-}" != "true" ]]; then
  echo "test: HERD_TEST_SANITIZERS=0; skipping the ASan+UBSan and TSan stages"
else
  run_stage "ASan+UBSan build and tests" sanitizer_stage address,undefined "$HERD_BUILD_DIR-asan" \
    "$asan_tests" "${asan_targets[@]}" || sanitizers_ok=0
  run_stage "TSan build and tests" sanitizer_stage thread "$HERD_BUILD_DIR-tsan" \
    "$tsan_tests" "${tsan_targets[@]}" || sanitizers_ok=0
fi

echo "test: stage times"
printf '  %s\n' "${stage_times[@]}"

if [[ $format_ok -eq 0 ]]; then
  echo "test: these files are not formatted as .clang-format says:" >&2
  printf '  %s\n' "${unformatted[@]}" >&2
  echo "test: fix them with scripts/format.sh" >&2
fi
if [[ $layers_ok -eq 0 ]]; then
  echo "test: these includes cross a layer (the layers are in docs/architecture.md):" >&2
  printf '%s\n' "$layer_crossings" >&2
fi
if [[ $sanitizers_ok -eq 0 ]]; then
  echo "test: a sanitizer stage failed; its report is above (docs/testing.md says how to rerun it)" >&2
fi
if [[ $ctest_status -ne 0 ]]; then
  exit "$ctest_status"
fi
[[ $format_ok -eq 1 && $layers_ok -eq 1 && $sanitizers_ok -eq 1 ]]
