#!/usr/bin/env bash
# Runs the measurements behind docs/performance.md and summarizes them:
#
#   benchmarks/run_report.sh OUT_DIR [RUNS]
#
# RUNS (default 5) repetitions, in turn, of:
#   - herd-bench allreduce 4 KiB .. 256 MiB (x4) at 2 and at 4 ranks;
#   - herd-bench step --model resnet50 at 2 and at 4 ranks;
#   - herd-bench allreduce 4 KiB .. 1 MiB (x16) with no warm-up and 9 calls at
#     2 and at 4 ranks (the first calls of a size);
#   - herd-bench step --model resnet50 --backward-ms 40 at 2 ranks (the
#     gradients arrive spread over 40 ms of backward compute);
#   - herd-bench step --model bert-base at 2 ranks;
# each run's CSV in OUT_DIR (stderr, with the notes, beside it in .log), then
# OUT_DIR/report.md: bench_median.py's tables (medians, and the same-run
# ratios of herd, out of place and in place, against the faster raw MPI row,
# in place or not, and against the memory-traffic floor, every rank's memcpy
# at once), OUT_DIR/allreduce_busbw.png, the plot of
# the medians, and OUT_DIR/results/NAME.json, each table as the data file that
# docs/performance.md's table NAME is rendered from (benchmarks/doc_tables.py:
# copy them to benchmarks/results/ and run its update). Exits non-zero if any
# run failed or had a wrong element.
#
# Build first (scripts/build.sh). Run it on a quiet machine: it is a
# measurement, and anything else running on the cores shows in the numbers.
# Takes about 13 minutes with RUNS=5 on a 2-core machine.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
herd_handle_help "$@"

# An option in either place is a mistake (--help is handled above): an
# output folder named like one, or a count that is not one, does no good.
if [[ $# -lt 1 || $# -gt 2 || "$1" == -* || ! "${2:-5}" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: benchmarks/run_report.sh OUT_DIR [RUNS]   (RUNS: a positive count; --help for more)" >&2
  exit 2
fi
out="$1"
runs="${2:-5}"
bench="$HERD_BUILD_DIR/benchmarks/herd-bench"
python=/usr/bin/python3
if [[ ! -x "$bench" ]]; then
  echo "run_report: $bench is missing; run scripts/build.sh first" >&2
  exit 2
fi
mkdir -p "$out/results"
mapfile -t mpirun_flags < <(herd_mpirun_flags)

# The herd-bench command of each table, by the table's name (a run's name
# less its _runN), for the data files.
declare -A commands

# run NAME RANKS ARGS...: one herd-bench run, with a time limit so that a
# hang cannot stall the report.
run() {
  local name="$1" ranks="$2"
  shift 2
  commands["${name%_run*}"]="mpirun -np $ranks herd-bench $* --csv"
  timeout 900 mpirun "${mpirun_flags[@]}" -np "$ranks" "$bench" "$@" --csv -q \
    >"$out/$name.csv" 2>"$out/$name.log"
}

for ((i = 1; i <= runs; ++i)); do
  echo "run_report: run $i of $runs"
  for ranks in 2 4; do
    run "allreduce_np${ranks}_run$i" "$ranks" allreduce -b 4K -e 256M -f 4 -n 20 -w 5
    run "step_resnet50_np${ranks}_run$i" "$ranks" step --model resnet50 -n 10 -w 3
    run "first_calls_np${ranks}_run$i" "$ranks" allreduce -b 4K -e 1M -f 16 -n 9 -w 0
  done
  run "step_resnet50_bw40_np2_run$i" 2 step --model resnet50 --backward-ms 40 -n 10 -w 3
  run "step_bert-base_np2_run$i" 2 step --model bert-base -n 5 -w 2
done

status=0
{
  echo "# herd-bench report: $runs runs, $(date -u +%Y-%m-%d), $(nproc) cores"
  echo
  for ranks in 2 4; do
    "$python" benchmarks/bench_median.py --title "allreduce, float32 sum, $ranks ranks" \
      --median-csv "$out/allreduce_np${ranks}_median.csv" \
      --json "$out/allreduce_np${ranks}.json" "$out"/allreduce_np"${ranks}"_run*.csv || status=1
    echo
    "$python" benchmarks/bench_median.py --title "first calls, $ranks ranks" \
      --json "$out/first_calls_np${ranks}.json" "$out"/first_calls_np"${ranks}"_run*.csv || status=1
    echo
    "$python" benchmarks/bench_median.py --title "ResNet-50 step, $ranks ranks" \
      --json "$out/step_resnet50_np${ranks}.json" "$out"/step_resnet50_np"${ranks}"_run*.csv ||
      status=1
    echo
  done
  "$python" benchmarks/bench_median.py \
    --title "ResNet-50 step with 40 ms of backward compute, 2 ranks" \
    --json "$out/step_resnet50_bw40_np2.json" "$out"/step_resnet50_bw40_np2_run*.csv || status=1
  echo
  "$python" benchmarks/bench_median.py --title "BERT-base step, 2 ranks" \
    --json "$out/step_bert-base_np2.json" "$out"/step_bert-base_np2_run*.csv || status=1
} >"$out/report.md"
for name in "${!commands[@]}"; do
  "$python" benchmarks/doc_tables.py record "$out/$name.json" \
    --command "${commands[$name]}" -o "$out/results/$name.json" || status=1
done
"$python" benchmarks/plot_busbw.py --title "allreduce busbw, float32 sum (medians of $runs runs)" \
  "np2=$out/allreduce_np2_median.csv" "np4=$out/allreduce_np4_median.csv" \
  -o "$out/allreduce_busbw.png" || status=1
echo "run_report: wrote $out/report.md, $out/allreduce_busbw.png and $out/results/"
exit "$status"
