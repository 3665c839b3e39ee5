#!/usr/bin/env bash
# Usage: scripts/train.sh [--] [HERD_TRAIN_ARGS...]
#
# herd's main job: installs what is missing (the Fashion-MNIST dataset
# included), builds, and trains herd-train's MLP on 2 workers through
# herdrun for a short run (HERD_TRAIN_RANKS for another count), 2 epochs
# unless HERD_EPOCHS or --epochs says otherwise. Extra arguments go to
# herd-train, e.g.
#   scripts/train.sh --epochs 5 --optimizer adam --learning-rate 0.001
#   scripts/train.sh --kvstore dist_async --num-servers 1
#   scripts/train.sh -- --help     (herd-train's options, after the build)
# Parameter-server ranks (--num-servers S, or HERD_NUM_SERVERS) come on top
# of the workers: herdrun starts HERD_TRAIN_RANKS + S processes.
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
servers="${HERD_NUM_SERVERS:-0}"
for ((i = 1; i <= $#; ++i)); do
  case "${!i}" in
    --num-servers=*) servers="${!i#--num-servers=}" ;;
    --num-servers) j=$((i + 1)) && servers="${!j:-0}" ;;
  esac
done
[[ "$servers" =~ ^[0-9]+$ ]] || servers=0  # herd-train says what is wrong with it
# herdrun starts the servers on top of the -np workers and adds
# --oversubscribe when the ranks outnumber the cores.
exec "$HERD_BUILD_DIR/launcher/herdrun" -np "${HERD_TRAIN_RANKS:-2}" --num-servers "$servers" \
  "$HERD_BUILD_DIR/examples/herd_train/herd-train" "$@"
