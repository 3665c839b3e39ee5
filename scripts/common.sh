# shellcheck shell=bash
# Helpers the scripts in this folder source; not meant to be run by itself.
# Sourcing it moves to the repository root, so every script works from any
# directory.

HERD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$HERD_ROOT" || exit 1

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
