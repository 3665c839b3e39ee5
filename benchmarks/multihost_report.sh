#!/usr/bin/env bash
# Runs the measurements across emulated hosts behind docs/performance.md's
# "Across hosts (emulated)" and summarizes them:
#
#   benchmarks/multihost_report.sh OUT_DIR [RUNS]
#
# Emulated hosts (scripts/emulated_hosts.py) are network namespaces of this
# machine, Open MPI between them over TCP only; HxL below is H hosts of L
# ranks. RUNS (default 1) repetitions, in turn, of:
#   - herd-bench allreduce 4 KiB .. 256 MiB (x4) at 2x1, 4x1 and 2x2, and at
#     2x2 with HERD_HIERARCHICAL_ALLREDUCE=0 (flat) and =1 (hierarchical);
#   - herd-bench step --model resnet50 at 2x1, 4x1 and 2x2 (also flat and
#     hierarchical);
#   - at 2x2, the same allreduce sweep and step with Open MPI's shared-memory
#     transport inside each host as well (--btl tcp,vader,self), whose raw
#     MPI rows join the TCP-only run's as mpi-sm* paths: herd is compared
#     with the faster of raw MPI over TCP alone and raw MPI with shared
#     memory inside the hosts, in place or not.
# Each run's CSV lands in OUT_DIR (stderr beside it in .log), then
# OUT_DIR/report.md: bench_median.py's tables (medians, and the same-run
# ratios of herd against the fastest raw MPI row), OUT_DIR/multihost_busbw.png,
# the plot of the medians, and OUT_DIR/results/NAME.json, each table as the
# data file docs/performance.md's table NAME is rendered from
# (benchmarks/doc_tables.py: copy them to benchmarks/results/ and run its
# update). Exits non-zero if any run failed or had a wrong element.
#
# HERD_REPORT_MAX_BYTES (default 256M) ends the allreduce sweeps earlier, for
# a quick check of the script. Build first (scripts/build.sh); needs root for
# the namespaces. Run it on a quiet machine: the emulated hosts share its
# cores and memory, and anything else running shows in the numbers. Takes
# about 15 minutes with RUNS=1 on a 2-core machine.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
herd_handle_help "$@"

if [[ $# -lt 1 || $# -gt 2 || "$1" == -* || ! "${2:-1}" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: benchmarks/multihost_report.sh OUT_DIR [RUNS]   (RUNS: a positive count; --help for more)" >&2
  exit 2
fi
out="$1"
runs="${2:-1}"
max_bytes="${HERD_REPORT_MAX_BYTES:-256M}"
if [[ ! "$max_bytes" =~ ^[1-9][0-9]*[KMG]?$ ]]; then
  echo "multihost_report: HERD_REPORT_MAX_BYTES='$max_bytes': expected a size such as 16M" >&2
  exit 2
fi
bench="$HERD_BUILD_DIR/benchmarks/herd-bench"
python=/usr/bin/python3
if [[ ! -x "$bench" ]]; then
  echo "multihost_report: $bench is missing; run scripts/build.sh first" >&2
  exit 2
fi
mkdir -p "$out/results"
mapfile -t mpirun_flags < <(herd_mpirun_flags)

# The herd-bench command of each table, by the table's name, for the data files.
declare -A commands

# run NAME HOSTS RANKS_PER_HOST BTL ARGS...: one herd-bench run on emulated
# hosts named "mr", with a time limit so that a hang cannot stall the report.
run() {
  local name="$1" hosts="$2" per_host="$3" btl="$4" setting=""
  shift 4
  if [[ -n "${HERD_HIERARCHICAL_ALLREDUCE:-}" ]]; then
    setting="HERD_HIERARCHICAL_ALLREDUCE=$HERD_HIERARCHICAL_ALLREDUCE "
  fi
  commands["${name%_run*}"]="${setting}emulated_hosts.py run --hosts $hosts --ranks-per-host $per_host --btl $btl -- herd-bench $* --csv"
  "$python" scripts/emulated_hosts.py run --name mr --hosts "$hosts" --ranks-per-host "$per_host" \
    --btl "$btl" --timeout 600 -- "${mpirun_flags[@]}" "$bench" "$@" --csv -q \
    >"$out/$name.csv" 2>"$out/$name.log"
}

# with_sm_baselines TCP_CSV SM_CSV OUT_CSV: the TCP-only run's rows, then the
# shared-memory run's raw MPI rows with their paths renamed mpi-sm*, so that
# bench_median.py's baseline (the fastest mpi* path) is the faster of the two.
with_sm_baselines() {
  awk -F, -v OFS=, '
    FNR == 1 { path = 0; for (i = 1; i <= NF; ++i) if ($i == "path") path = i }
    FNR == NR { print; next }
    /^#/ || FNR == 1 { next }
    path && $path ~ /^mpi/ { sub(/^mpi/, "mpi-sm", $path); print }
  ' "$1" "$2" >"$3"
}

sweep=(allreduce -b 4K -e "$max_bytes" -f 4 -n 5 -w 1)
step=(step --model resnet50 -n 5 -w 2)
for ((i = 1; i <= runs; ++i)); do
  echo "multihost_report: run $i of $runs"
  for layout in 2x1 4x1; do
    run "allreduce_${layout}_run$i" "${layout%x*}" "${layout#*x}" tcp,self "${sweep[@]}"
    run "step_resnet50_${layout}_run$i" "${layout%x*}" "${layout#*x}" tcp,self "${step[@]}"
  done
  run "allreduce_2x2_run$i" 2 2 tcp,self "${sweep[@]}"
  run "step_resnet50_2x2_run$i" 2 2 tcp,self "${step[@]}"
  for hierarchical in 0 1; do
    HERD_HIERARCHICAL_ALLREDUCE=$hierarchical \
      run "allreduce_2x2_hier${hierarchical}_run$i" 2 2 tcp,self "${sweep[@]}"
    HERD_HIERARCHICAL_ALLREDUCE=$hierarchical \
      run "step_resnet50_2x2_hier${hierarchical}_run$i" 2 2 tcp,self "${step[@]}"
  done
  run "allreduce_2x2_sm_run$i" 2 2 tcp,vader,self "${sweep[@]}"
  run "step_resnet50_2x2_sm_run$i" 2 2 tcp,vader,self "${step[@]}"
  for kind in allreduce step_resnet50; do
    with_sm_baselines "$out/${kind}_2x2_run$i.csv" "$out/${kind}_2x2_sm_run$i.csv" \
      "$out/${kind}_2x2_best_run$i.csv"
  done
done
for kind in allreduce step_resnet50; do
  commands["${kind}_2x2_best"]="${commands[${kind}_2x2]} and, with --btl tcp,vader,self, its raw MPI rows as mpi-sm*"
done

# The tables, by name: TITLE.
declare -A titles=(
  [allreduce_2x1]="allreduce, float32 sum, 2 hosts x 1 rank"
  [allreduce_4x1]="allreduce, float32 sum, 4 hosts x 1 rank"
  [allreduce_2x2_best]="allreduce, float32 sum, 2 hosts x 2 ranks, against the faster of raw MPI over TCP and with shared memory inside the hosts"
  [allreduce_2x2_hier0]="allreduce, float32 sum, 2 hosts x 2 ranks, HERD_HIERARCHICAL_ALLREDUCE=0"
  [allreduce_2x2_hier1]="allreduce, float32 sum, 2 hosts x 2 ranks, HERD_HIERARCHICAL_ALLREDUCE=1"
  [step_resnet50_2x1]="ResNet-50 step, 2 hosts x 1 rank"
  [step_resnet50_4x1]="ResNet-50 step, 4 hosts x 1 rank"
  [step_resnet50_2x2_best]="ResNet-50 step, 2 hosts x 2 ranks, against the faster of raw MPI over TCP and with shared memory inside the hosts"
  [step_resnet50_2x2_hier0]="ResNet-50 step, 2 hosts x 2 ranks, HERD_HIERARCHICAL_ALLREDUCE=0"
  [step_resnet50_2x2_hier1]="ResNet-50 step, 2 hosts x 2 ranks, HERD_HIERARCHICAL_ALLREDUCE=1"
)
tables=(allreduce_2x1 allreduce_4x1 allreduce_2x2_best allreduce_2x2_hier0 allreduce_2x2_hier1
  step_resnet50_2x1 step_resnet50_4x1 step_resnet50_2x2_best step_resnet50_2x2_hier0
  step_resnet50_2x2_hier1)

status=0
{
  echo "# herd-bench across emulated hosts: $runs runs, $(date -u +%Y-%m-%d), $(nproc) cores"
  echo
  for name in "${tables[@]}"; do
    median_csv=()
    [[ "$name" == allreduce_* ]] && median_csv=(--median-csv "$out/${name}_median.csv")
    "$python" benchmarks/bench_median.py --title "${titles[$name]}" "${median_csv[@]}" \
      --json "$out/multihost_$name.json" "$out/${name}"_run*.csv || status=1
    echo
  done
} >"$out/report.md"
for name in "${tables[@]}"; do
  "$python" benchmarks/doc_tables.py record "$out/multihost_$name.json" \
    --command "${commands[$name]}" --machine "$(nproc) cores, emulated hosts (network namespaces)" \
    -o "$out/results/multihost_$name.json" || status=1
done
"$python" benchmarks/plot_busbw.py \
  --title "allreduce busbw across emulated hosts, float32 sum (medians of $runs runs)" \
  "2x1=$out/allreduce_2x1_median.csv" "4x1=$out/allreduce_4x1_median.csv" \
  "2x2=$out/allreduce_2x2_best_median.csv" -o "$out/multihost_busbw.png" || status=1
echo "multihost_report: wrote $out/report.md, $out/multihost_busbw.png and $out/results/"
exit "$status"
