#!/usr/bin/env bash
# Usage: scripts/train_pytorch.sh [--] [EXAMPLE_ARGS...]
#
# The PyTorch job: installs what is missing, installs the herd Python package
# into .venv (scripts/install_python.sh), and runs
# examples/pytorch_fashion_mnist.py on 2 ranks (HERD_TRAIN_RANKS for another
# count). Extra arguments go to the example, e.g.
#   scripts/train_pytorch.sh --epochs 5 --fp16-allreduce
#   HERD_TRAIN_RANKS=4 scripts/train_pytorch.sh
#   scripts/train_pytorch.sh -- --help     (the example's options, after the install)
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
herd_handle_help "$@"
if [[ "${1:-}" == -- ]]; then shift; fi

scripts/install_python.sh
venv="${HERD_VENV:-$HERD_ROOT/.venv}"
mapfile -t mpirun_flags < <(herd_mpirun_flags)
exec mpirun "${mpirun_flags[@]}" -np "${HERD_TRAIN_RANKS:-2}" \
  "$venv/bin/python" examples/pytorch_fashion_mnist.py "$@"
