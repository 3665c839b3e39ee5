#!/usr/bin/env bash
# Usage: scripts/install_python.sh
#
# Installs the herd Python package (herd, herd.numpy, herd.torch) into a
# virtual environment over Debian's /usr/bin/python3, so the environment sees
# Debian's numpy, torch and pytest and nothing is fetched from PyPI:
#   .venv/ (or $HERD_VENV), made with --system-site-packages
#   pip install --no-build-isolation .   (setup.py drives herd's CMake)
# Afterwards `.venv/bin/python -c "import herd.torch"` works, and
# `mpirun -np 2 .venv/bin/python your_script.py` runs a training script.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
herd_handle_help "$@"

scripts/install_deps.sh

venv="${HERD_VENV:-$HERD_ROOT/.venv}"
if [[ ! -x "$venv/bin/python" ]]; then
  echo "install_python: making $venv from /usr/bin/python3"
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
"$venv/bin/python" -m pip install --no-build-isolation --no-index --disable-pip-version-check \
  --quiet "$HERD_ROOT"
"$venv/bin/python" -c "import herd, herd.torch; print('install_python: herd', herd.__version__, 'in', '$venv')"
