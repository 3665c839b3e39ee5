# shellcheck shell=bash
# Usage, in a script of herd: source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
#
# Helpers that herd's scripts (scripts/, benchmarks/) source; not meant to be
# run by itself. Sourcing it moves to the repository root, so every script
# works from any directory.

# The sourcing script by its absolute path, taken before the cd below.
HERD_SCRIPT="$(cd "$(dirname "${BASH_SOURCE[1]:-$0}")" && pwd)/$(basename "${BASH_SOURCE[1]:-$0}")"
HERD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$HERD_ROOT" || exit 1

# herd_handle_help "$@": when the first argument is -h or --help, prints the
# sourcing script's opening comment (its usage, without the '# ') and exits
# 0. Every script calls it before doing anything else.
herd_handle_help() {
  case "${1:-}" in
    -h | --help) ;;
    *) return 0 ;;
  esac
  sed -n '2,${/^#/!q;s/^# \{0,1\}//;p}' "$HERD_SCRIPT"
  exit 0
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  herd_handle_help "$@"
  echo "common.sh: sourced by herd's scripts, not run; see scripts/common.sh --help" >&2
  exit 2
fi

# The build folder scripts/build.sh configures and the others use.
HERD_BUILD_DIR="${HERD_BUILD_DIR:-build}"

# Prints the mpirun flags herd's scripts use, one a line: --oversubscribe so
# that more ranks than cores can run, and --allow-run-as-root as root (CI,
# containers). Open MPI flags: herd is built and tested with Open MPI.
herd_mpirun_flags() {
  echo --oversubscribe
  if [[ "$(id -u)" -eq 0 ]]; then
    echo --allow-run-as-root
  fi
}

# Prints the project's C++ sources, one a line, relative to the root; skips
# build folders, .git and Python environments.
herd_cxx_sources() {
  find . -type d \( -name 'build*' -o -name '.git' -o -name '.venv' -o -name '__pycache__' \) -prune \
    -o -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -print |
    sed 's|^\./||' | LC_ALL=C sort
}
