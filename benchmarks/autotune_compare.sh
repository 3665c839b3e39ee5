#!/usr/bin/env bash
# Autotuning against herd's defaults and against the best of a manual sweep.
#
#   benchmarks/autotune_compare.sh [OUT_DIR]
#
# For each model (AUTOTUNE_MODELS, default "resnet50 bert-base") runs
# `herd-bench step --herd-only` on AUTOTUNE_RANKS (2) ranks, AUTOTUNE_ITERS
# (20) timed steps per launch, in these configurations, one launch of each
# per round, the rounds (AUTOTUNE_ROUNDS, 3) alternating the configurations
# so that a machine's slow spell touches them all alike:
#   defaults   herd as configured by default;
#   autotune   HERD_AUTOTUNE=1, tuned during AUTOTUNE_WARMUP (600) untimed
#              steps with HERD_AUTOTUNE_STEPS_PER_SAMPLE=AUTOTUNE_STEPS (2)
#              and one warmup sample; the timed steps run the settings it
#              fixed (the launch fails the script if its log has no best row
#              by then);
#   sweep      every HERD_FUSION_THRESHOLD of AUTOTUNE_THRESHOLDS (1, 4, 16
#              and 64 MiB) with every HERD_FUSION_MAX_TENSOR_BYTES of
#              AUTOTUNE_MAX_TENSORS (256 KiB and 0, no limit).
# Prints a Markdown table per model: each configuration's median step time
# over its rounds (each round's figure being that launch's median), with
# the best sweep point marked, then the settings each autotune launch fixed.
# Every launch's output and autotune log stays in OUT_DIR (default: a
# temporary folder, removed at the end). Build first (scripts/build.sh, or
# HERD_BUILD_DIR). Extra mpirun flags: AUTOTUNE_MPIRUN_FLAGS.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
herd_handle_help "$@"

out="${1:-}"
read -r -a models <<<"${AUTOTUNE_MODELS:-resnet50 bert-base}"
ranks="${AUTOTUNE_RANKS:-2}"
rounds="${AUTOTUNE_ROUNDS:-3}"
iters="${AUTOTUNE_ITERS:-20}"
tune_warmup="${AUTOTUNE_WARMUP:-600}"
tune_steps="${AUTOTUNE_STEPS:-2}"
read -r -a thresholds <<<"${AUTOTUNE_THRESHOLDS:-1048576 4194304 16777216 67108864}"
read -r -a max_tensors <<<"${AUTOTUNE_MAX_TENSORS:-262144 0}"
bench="$HERD_BUILD_DIR/benchmarks/herd-bench"
if [[ ! -x "$bench" ]]; then
  echo "autotune_compare: $bench is missing; run scripts/build.sh first" >&2
  exit 2
fi
if [[ -z "$out" ]]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
mapfile -t mpirun_flags < <(herd_mpirun_flags)
read -r -a extra_flags <<<"${AUTOTUNE_MPIRUN_FLAGS:-}"

# The configurations: a label and its environment (space-separated VAR=value).
labels=(defaults autotune)
envs=("" "HERD_AUTOTUNE=1 HERD_AUTOTUNE_WARMUP_SAMPLES=1 HERD_AUTOTUNE_STEPS_PER_SAMPLE=$tune_steps")
for threshold in "${thresholds[@]}"; do
  for max_tensor in "${max_tensors[@]}"; do
    labels+=("sweep t=$threshold m=$max_tensor")
    envs+=("HERD_FUSION_THRESHOLD=$threshold HERD_FUSION_MAX_TENSOR_BYTES=$max_tensor")
  done
done

# launch MODEL INDEX ROUND: prints that launch's median step in ms.
launch() {
  local model="$1" index="$2" round="$3"
  local name="$model-$index-$round"
  local log="$out/$name.log" warmup=3
  local -a env_args=()
  read -r -a env_args <<<"${envs[$index]}"
  if [[ "${labels[$index]}" == autotune ]]; then
    warmup="$tune_warmup"
    env_args+=("HERD_AUTOTUNE_LOG=$out/$name.csv")
  fi
  local -a forward=()
  for assignment in "${env_args[@]}"; do forward+=(-x "$assignment"); done
  if ! mpirun "${mpirun_flags[@]}" "${extra_flags[@]}" "${forward[@]}" -np "$ranks" "$bench" \
    step --herd-only --model "$model" -n "$iters" -w "$warmup" --csv -q >"$log" 2>&1; then
    echo "autotune_compare: $name (${labels[$index]}) failed, see $log:" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  if [[ "${labels[$index]}" == autotune ]] && ! grep -q '^best,' "$out/$name.csv"; then
    echo "autotune_compare: $name: no best row after $warmup steps; raise AUTOTUNE_WARMUP" >&2
    exit 1
  fi
  awk -F, '$6 == "herd" {print $7}' "$log"
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for model in "${models[@]}"; do
  declare -A times=()
  for ((round = 0; round < rounds; ++round)); do
    for index in "${!labels[@]}"; do
      echo "autotune_compare: $model, round $((round + 1))/$rounds, ${labels[$index]}" >&2
      times[$index]+="$(launch "$model" "$index" "$round") "
    done
  done
  best_sweep="" best_ms=""
  declare -A medians=()
  for index in "${!labels[@]}"; do
    medians[$index]="$(tr ' ' '\n' <<<"${times[$index]}" | grep . | median)"
    if [[ "${labels[$index]}" == sweep* ]] &&
      { [[ -z "$best_ms" ]] || awk -v a="${medians[$index]}" -v b="$best_ms" 'BEGIN {exit !(a < b)}'; }; then
      best_sweep="$index" best_ms="${medians[$index]}"
    fi
  done
  echo
  echo "$model, $ranks ranks, $rounds rounds of $iters steps: median step (ms)"
  echo
  echo "| configuration | median step ms | per round |"
  echo "|---|---|---|"
  for index in "${!labels[@]}"; do
    label="${labels[$index]}"
    [[ "$index" == "$best_sweep" ]] && label+=" (best sweep)"
    echo "| $label | ${medians[$index]} | ${times[$index]% } |"
  done
  echo
  echo "autotune fixed (fusion_threshold, max_tensor, shm_chunk, ring_segment):"
  for ((round = 0; round < rounds; ++round)); do
    csv="$out/$model-1-$round.csv"
    echo "  round $((round + 1)): $(awk -F, '$1 == "best" {print $3", "$4", "$5", "$6}' "$csv")" \
      "after $(($(wc -l <"$csv") - 2)) trials"
  done
  unset times medians
done
