#!/usr/bin/env bash
# Usage: scripts/install_deps.sh
#
# Installs the Debian packages herd needs to build and test, and nothing when
# they are all there already. Needs root or sudo only when something is
# missing. Exits non-zero, saying why, when it cannot install them.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
herd_handle_help "$@"

packages=(
  build-essential cmake ninja-build clang-format
  libopenmpi-dev openmpi-bin
  libeigen3-dev libfmt-dev catch2 libcli11-dev nlohmann-json3-dev
  libbenchmark-dev python3-matplotlib python3-numpy python3-pytest python3-cloudpickle
  zlib1g-dev dataset-fashion-mnist
  pybind11-dev python3-dev python3-torch python3-venv python3-setuptools python3-wheel
  python3-pil
)

if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "install_deps: not a Debian system; install these yourself (or their equivalents):" >&2
  echo "  ${packages[*]}" >&2
  exit 0
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$package")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

fail() {
  echo "install_deps: $1" >&2
  echo "install_deps: install them by hand: apt-get install -y ${missing[*]}" >&2
  exit 1
}

echo "install_deps: missing: ${missing[*]}"
sudo=()
if [[ "$(id -u)" -ne 0 ]]; then
  command -v sudo >/dev/null 2>&1 || fail "not root and no sudo"
  sudo=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update || fail "apt-get update failed"
"${sudo[@]}" apt-get install -y "${missing[@]}" || fail "apt-get install failed"
echo "install_deps: done"
