#!/usr/bin/env bash
# herd.torch against a real Horovod, through the same scripts, in turns:
#
#   benchmarks/compare_horovod.sh HOROVOD_SRC OUT_DIR [RUNS]
#
# HOROVOD_SRC is a Horovod source tree with its torch extension built in
# place (any Horovod with the horovod.torch API; it is imported from there
# with PYTHONPATH, and is never part of herd). RUNS (default 5) times, at 2
# and then 4 ranks, back to back:
#   - benchmarks/python_overhead.py through herd.torch, then horovod.torch
#     with its defaults and with HOROVOD_CYCLE_TIME=0.1 (allreduce,
#     allreduce_, allreduce_async_ + synchronize, 4 KiB..64 MiB);
#   - benchmarks/python_step.py (ResNet-50's 161 gradients per step) through
#     herd.torch with a tensor per gradient, herd.torch with the gradients in
#     one shared arena, and Horovod with its defaults, with
#     HOROVOD_FUSION_THRESHOLD=0, with HOROVOD_CYCLE_TIME=0.1 and with both;
# each launch's JSON in OUT_DIR, then OUT_DIR/report.md from
# benchmarks/compare_modules.py (the fastest Horovod setting's time over
# herd's within each run, median and range over the runs) and OUT_DIR/results/torch_vs_horovod_*.json
# for docs/performance.md (benchmarks/doc_tables.py). Build herd first
# (scripts/build.sh) and run it on a quiet machine.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
herd_handle_help "$@"

if [[ $# -lt 2 || $# -gt 3 || "$1" == -* || ! "${3:-5}" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: benchmarks/compare_horovod.sh HOROVOD_SRC OUT_DIR [RUNS]   (--help for more)" >&2
  exit 2
fi
horovod="$(cd "$1" && pwd)"
out="$2"
runs="${3:-5}"
python=/usr/bin/python3
herd_python="$(cd "$HERD_BUILD_DIR/python" && pwd)"
if ! ls "$horovod"/horovod/torch/mpi_lib_v2*.so >/dev/null 2>&1; then
  echo "compare_horovod: $horovod/horovod/torch has no built mpi_lib_v2 extension" >&2
  exit 2
fi
mkdir -p "$out/results"
mapfile -t mpirun_flags < <(herd_mpirun_flags)

launch() {  # launch NAME RANKS PYTHONPATH [ENV=VALUE...] -- SCRIPT ARGS...
  local name="$1" ranks="$2" path="$3"
  shift 3
  local env=()
  while [[ "$1" != -- ]]; do env+=(-x "$1"); shift; done
  shift
  timeout 900 mpirun "${mpirun_flags[@]}" -np "$ranks" -x PYTHONPATH="$path" "${env[@]}" \
    "$python" "$@" >"$out/$name.log" 2>&1
}

# Horovod's settings tried: its defaults, and those that made it fastest here
# (a 0.1 ms cycle for lone tensors; no fusion, or both, for a step).
horovod_calls_settings=(default HOROVOD_CYCLE_TIME=0.1)
horovod_step_settings=(default HOROVOD_FUSION_THRESHOLD=0 HOROVOD_CYCLE_TIME=0.1
                       "HOROVOD_FUSION_THRESHOLD=0 HOROVOD_CYCLE_TIME=0.1")
tag() {  # the file name part of a settings word list
  local words="$1"
  [[ "$words" == default ]] && { echo default; return; }
  echo "$words" | sed -e 's/HOROVOD_FUSION_THRESHOLD=/fusion/g' -e 's/HOROVOD_CYCLE_TIME=/cycle/g' \
    -e 's/ /-/g'
}
horovod_env() {  # the -x arguments of a settings word list
  [[ "$1" != default ]] && echo "$1"
  return 0
}

for ((i = 1; i <= runs; ++i)); do
  echo "compare_horovod: run $i of $runs"
  for ranks in 2 4; do
    launch "calls_np${ranks}_herd_run$i" "$ranks" "$herd_python" -- \
      benchmarks/python_overhead.py --module herd.torch --max-calls 200 --min-calls 20 \
      --json "$out/calls_np${ranks}_herd_run$i.json"
    for settings in "${horovod_calls_settings[@]}"; do
      name="calls_np${ranks}_horovod-$(tag "$settings")_run$i"
      # shellcheck disable=SC2046
      launch "$name" "$ranks" "$horovod" $(horovod_env "$settings") -- \
        benchmarks/python_overhead.py --module horovod.torch --max-calls 200 --min-calls 20 \
        --json "$out/$name.json"
    done
    for arena in plain shared; do
      launch "step_np${ranks}_herd-${arena}_run$i" "$ranks" "$herd_python" -- \
        benchmarks/python_step.py --arena "$arena" --json "$out/step_np${ranks}_herd-${arena}_run$i.json"
    done
    for settings in "${horovod_step_settings[@]}"; do
      name="step_np${ranks}_horovod-$(tag "$settings")_run$i"
      # shellcheck disable=SC2046
      launch "$name" "$ranks" "$horovod" $(horovod_env "$settings") -- \
        benchmarks/python_step.py --module horovod.torch --json "$out/$name.json"
    done
  done
done
"$python" benchmarks/compare_modules.py "$out" --record-prefix "$out/results/torch_vs_horovod" \
  --command "benchmarks/compare_horovod.sh HOROVOD_SRC OUT $runs" >"$out/report.md"
echo "compare_horovod: wrote $out/report.md and $out/results/"
