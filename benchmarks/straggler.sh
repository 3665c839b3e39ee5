#!/usr/bin/env bash
# The straggler benchmark: how each of herd-train's engines copes with one
# slow worker.
#
#   benchmarks/straggler.sh [OUT_DIR] [-- HERD_TRAIN_ARGS...]
#
# Trains herd-train on 3 workers (STRAGGLER_WORKERS) with --kvstore horovod,
# dist_sync and dist_async (plus 1 parameter server, STRAGGLER_SERVERS), each
# twice: unslowed, and with the last worker slowed (--slow-rank, its compute
# taking STRAGGLER_SLOW_FACTOR = 2 times as long: half speed). Prints a
# Markdown table: every worker's steps/s (its steps over its own training
# time, evaluation excluded: --print-step-rates), the fast workers' mean
# steps/s as a percentage of the same workers' unslowed rate, and the test
# accuracy after the last epoch. Synchronous engines run at the straggler's
# pace; dist_async keeps the fast workers at their own.
#
# Every step also waits STRAGGLER_DEVICE_MS = 10 ms of simulated device
# compute (herd-train --device-ms), which takes no core: so the rates follow
# who waits for whom even where the processes outnumber the cores, as they
# would with the compute on GPUs. STRAGGLER_DEVICE_MS=0 measures the CPU
# compute alone, which needs an otherwise idle machine with at least workers
# + servers cores.
#
# Exits 1 when a run fails, 77 when the dataset is missing. herd-train's
# output of each run is kept in OUT_DIR (default: a temporary
# folder, removed at the end). Arguments after -- go to every run (default
# --epochs 1). Build first (scripts/build.sh, or HERD_BUILD_DIR). Extra mpirun
# flags: STRAGGLER_MPIRUN_FLAGS (e.g. "--bind-to none").
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
[[ ${#train_args[@]} -gt 0 ]] || train_args=(--epochs 1)

workers="${STRAGGLER_WORKERS:-3}"
servers="${STRAGGLER_SERVERS:-1}"
factor="${STRAGGLER_SLOW_FACTOR:-2}"
device_ms="${STRAGGLER_DEVICE_MS:-10}"
slow=$((workers - 1))
train="$HERD_BUILD_DIR/examples/herd_train/herd-train"
if [[ ! -x "$train" ]]; then
  echo "straggler: $train is missing; run scripts/build.sh first" >&2
  exit 2
fi
if [[ -z "$out" ]]; then
  out="$(mktemp -d)"
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
mapfile -t mpirun_flags < <(herd_mpirun_flags)
read -r -a extra_flags <<<"${STRAGGLER_MPIRUN_FLAGS:-}"

# run ENGINE SLOWED: herd-train's output in $out/ENGINE-SLOWED.log.
run() {
  local engine="$1" slowed="$2" np="$workers"
  local args=(--kvstore "$engine" --print-step-rates --quiet --device-ms "$device_ms")
  if [[ "$engine" == dist_async ]]; then
    np=$((workers + servers))
    args+=(--num-servers "$servers")
  fi
  if [[ "$slowed" == slowed ]]; then args+=(--slow-rank "$slow" --slow-factor "$factor"); fi
  local log="$out/$engine-$slowed.log"
  echo "straggler: $engine, $slowed ($np processes)" >&2
  local rc=0
  mpirun "${mpirun_flags[@]}" "${extra_flags[@]}" -np "$np" "$train" "${args[@]}" \
    "${train_args[@]}" >"$log" 2>&1 || rc=$?
  if [[ $rc -eq 77 ]]; then
    echo "straggler: Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)" >&2
    exit 77
  fi
  if [[ $rc -ne 0 ]]; then
    echo "straggler: herd-train failed (exit $rc), see $log:" >&2
    tail -20 "$log" >&2
    exit 1
  fi
}

rates() { sed -n 's/^steps\/s: //p' "$1"; }
accuracy() { awk '$1 ~ /^[0-9]+$/ && $3 ~ /%$/ {acc = $3} END {print acc}' "$1"; }

header="| engine | worker $slow | "
for ((w = 0; w < workers; ++w)); do header+="steps/s w$w | "; done
header+="fast workers vs unslowed | test accuracy |"
echo "$header"
echo "|$(printf -- '---|%.0s' $(seq 1 $((workers + 4))))"
for engine in horovod dist_sync dist_async; do
  run "$engine" unslowed
  run "$engine" slowed
  base="$(rates "$out/$engine-unslowed.log")"
  for slowed in unslowed slowed; do
    log="$out/$engine-$slowed.log"
    now="$(rates "$log")"
    label="$engine"
    [[ "$engine" == dist_async ]] && label="dist_async, $servers server$([[ $servers -eq 1 ]] || echo s)"
    state="full speed"
    [[ "$slowed" == slowed ]] && state="1/$factor speed"
    # The fast workers (every worker but the slowed one): mean rate, as a
    # percentage of the same workers' unslowed mean.
    percent="$(awk -v now="$now" -v base="$base" -v slow="$slow" 'BEGIN {
      n = split(now, r, " "); split(base, b, " "); s = 0; t = 0;
      for (i = 1; i <= n; ++i) if (i - 1 != slow) { s += r[i]; t += b[i] }
      printf "%.0f%%", 100 * s / t }')"
    echo "| $label | $state | ${now// / | } | $percent | $(accuracy "$log") |"
  done
done
