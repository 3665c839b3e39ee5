#!/usr/bin/env bash
# Usage: scripts/train.sh [--] [HERD_TRAIN_ARGS...]
#
# herd's main job: installs what is missing (the Fashion-MNIST dataset
# included), builds, and trains herd-train's MLP on 2 ranks for a short run
# (HERD_TRAIN_RANKS for another count), 2 epochs unless HERD_EPOCHS or
# --epochs says otherwise. Extra arguments go to herd-train, e.g.
#   scripts/train.sh --epochs 5 --optimizer adam --learning-rate 0.001
#   scripts/train.sh -- --help     (herd-train's options, after the build)
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
herd_handle_help "$@"
if [[ "${1:-}" == -- ]]; then shift; fi

scripts/install_deps.sh
scripts/build.sh

# herd-train reads every option also from HERD_<OPTION>; a command-line
# option wins over the variable.
export HERD_EPOCHS="${HERD_EPOCHS:-2}"
mapfile -t mpirun_flags < <(herd_mpirun_flags)
exec mpirun "${mpirun_flags[@]}" -np "${HERD_TRAIN_RANKS:-2}" \
  "$HERD_BUILD_DIR/examples/herd_train/herd-train" "$@"
