#!/usr/bin/env bash
# herd-train's samples/s from a .rec file against the same from the IDX files.
#
#   benchmarks/herd_train_rec.sh [OUT_DIR] [-- HERD_TRAIN_ARGS...]
#
# Packs Fashion-MNIST's IDX files into train.rec and test.rec (herd-rec pack,
# with their .idx) in OUT_DIR, then trains herd-train on 2 workers
# (HERD_TRAIN_REC_RANKS) three ways in turn, for 3 rounds
# (HERD_TRAIN_REC_ROUNDS): from the IDX files with --data-sharding parts (the
# data in memory), from --data train.rec --val-data test.rec by index, and by
# byte range (the .idx files moved away). All three train on the same
# samples in the same order. A run's rate is the mean of its epoch lines'
# samples/s (training only: evaluation excluded). Prints a Markdown table: a
# row per round, then the median of the rounds and its ratio to IDX's.
#
# Exits 1 when a run fails, 77 when the dataset is missing. Each run's output
# is kept in OUT_DIR (default: a temporary folder, removed at the end).
# Arguments after -- go to every run (default --epochs 2). Build first
# (scripts/build.sh, or HERD_BUILD_DIR: herd-train and herd-rec). Extra
# mpirun flags: HERD_TRAIN_REC_MPIRUN_FLAGS (e.g. "--bind-to none").
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
herd_handle_help "$@"

out=""
if [[ $# -gt 0 && "$1" != -- ]]; then
  out="$1"
  shift
fi
if [[ "${1:-}" == -- ]]; then shift; fi
train_args=("$@")
[[ ${#train_args[@]} -gt 0 ]] || train_args=(--epochs 2)

ranks="${HERD_TRAIN_REC_RANKS:-2}"
rounds="${HERD_TRAIN_REC_ROUNDS:-3}"
fashion="/usr/share/datasets/fashion-mnist"
train="$HERD_BUILD_DIR/examples/herd_train/herd-train"
rec="$HERD_BUILD_DIR/tools/herd_rec/herd-rec"
for program in "$train" "$rec"; do
  if [[ ! -x "$program" ]]; then
    echo "herd_train_rec: $program is missing; run scripts/build.sh first" >&2
    exit 2
  fi
done
if [[ ! -f "$fashion/train-images-idx3-ubyte.gz" ]]; then
  echo "herd_train_rec: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)" >&2
  exit 77
fi
if [[ -z "$out" ]]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
mapfile -t mpirun_flags < <(herd_mpirun_flags)
read -r -a extra_flags <<<"${HERD_TRAIN_REC_MPIRUN_FLAGS:-}"

for split in train:train t10k:test; do
  "$rec" pack --idx-images "$fashion/${split%%:*}-images-idx3-ubyte.gz" \
    --idx-labels "$fashion/${split%%:*}-labels-idx1-ubyte.gz" -o "$out/${split##*:}.rec" >/dev/null
done

# run SOURCE ROUND: herd-train's output in $out/SOURCE-ROUND.log; prints the rate.
run() {
  local source="$1" round="$2" args=()
  case "$source" in
    idx) args=(--data-sharding parts) ;;
    index) args=(--data "$out/train.rec" --val-data "$out/test.rec") ;;
    byte_range)
      args=(--data "$out/train.rec" --val-data "$out/test.rec")
      mv "$out/train.idx" "$out/train.idx.kept"
      mv "$out/test.idx" "$out/test.idx.kept"
      ;;
  esac
  local log="$out/$source-$round.log" rc=0
  echo "herd_train_rec: round $round, $source" >&2
  mpirun "${mpirun_flags[@]}" "${extra_flags[@]}" -np "$ranks" "$train" --quiet "${args[@]}" \
    "${train_args[@]}" >"$log" 2>&1 || rc=$?
  if [[ "$source" == byte_range ]]; then
    mv "$out/train.idx.kept" "$out/train.idx"
    mv "$out/test.idx.kept" "$out/test.idx"
  fi
  if [[ $rc -ne 0 ]]; then
    echo "herd_train_rec: herd-train failed (exit $rc), see $log:" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  awk '$1 ~ /^[0-9]+$/ && NF == 5 {s += $4; n += 1} END {printf "%.0f", s / n}' "$log"
}

median() { tr ' ' '\n' | sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

sources=(idx index byte_range)
declare -A rates
echo "| round | IDX (in memory) samples/s | .rec by index | .rec by byte range |"
echo "|---|---|---|---|"
for ((round = 1; round <= rounds; ++round)); do
  row="| $round |"
  for source in "${sources[@]}"; do
    rate="$(run "$source" "$round")"
    rates[$source]+="$rate "
    row+=" $rate |"
  done
  echo "$row"
done
row="| median |"
ratio_row="| vs IDX |"
base="$(median <<<"${rates[idx]% }")"
for source in "${sources[@]}"; do
  m="$(median <<<"${rates[$source]% }")"
  row+=" $m |"
  ratio_row+=" $(awk -v m="$m" -v b="$base" 'BEGIN {printf "%.1f%%", 100 * m / b}') |"
done
echo "$row"
echo "$ratio_row"
