#!/usr/bin/env bash
# The timeline's cost on a training step: herd-bench step (ResNet-50's
# gradients reduced as a backward pass produces them) at 2 ranks on one
# machine, launches alternating without and with the timeline
# (HERD_TIMELINE=<dir>/t.%r.json and HERD_TIMELINE_MARK_CYCLES=1).
#
#   benchmarks/timeline_cost.sh [PAIRS]
#
# Runs PAIRS (default 6) pairs of launches and prints each launch's median
# step of the herd and herd-nofusion rows, then per row the median over the
# launches without and with the timeline and their difference in percent
# (docs/timeline.md, "Cost"). The timeline files go to a temporary folder,
# removed at the end. herd-bench's arguments: TIMELINE_COST_ARGS (default
# "-n 20 -w 3"); extra mpirun flags: TIMELINE_COST_MPIRUN_FLAGS. Build first
# (scripts/build.sh, or HERD_BUILD_DIR). The launches spread by a few ms even
# on an idle machine: measure on one that runs nothing else.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
herd_handle_help "$@"

pairs="${1:-6}"
bench="$HERD_BUILD_DIR/benchmarks/herd-bench"
if [[ ! -x "$bench" ]]; then
  echo "timeline_cost: $bench is missing; run scripts/build.sh first" >&2
  exit 2
fi
read -r -a bench_args <<<"${TIMELINE_COST_ARGS:--n 20 -w 3}"
mapfile -t mpirun_flags < <(herd_mpirun_flags)
read -r -a extra_flags <<<"${TIMELINE_COST_MPIRUN_FLAGS:-}"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT

# One launch; prints "<row> <median ms>" for the two herd rows.
launch() {
  mpirun "${mpirun_flags[@]}" "${extra_flags[@]}" -np 2 "$@" \
    "$bench" step "${bench_args[@]}" --csv -q |
    awk -F, '$6 == "herd" || $6 == "herd-nofusion" { print $6, $7 }'
}

results="$dir/results"
: >"$results"
for ((i = 1; i <= pairs; i++)); do
  launch | while read -r row ms; do
    echo "off $row $ms" | tee -a "$results"
  done
  launch -x HERD_TIMELINE="$dir/t.%r.json" -x HERD_TIMELINE_MARK_CYCLES=1 |
    while read -r row ms; do
      echo "on $row $ms" | tee -a "$results"
    done
done

median() {
  sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
echo
echo "row            off (ms)   on (ms)   difference"
for row in herd herd-nofusion; do
  off="$(awk -v r="$row" '$1 == "off" && $2 == r { print $3 }' "$results" | median)"
  on="$(awk -v r="$row" '$1 == "on" && $2 == r { print $3 }' "$results" | median)"
  awk -v r="$row" -v off="$off" -v on="$on" \
    'BEGIN { printf "%-13s %9.3f %9.3f %+10.1f %%\n", r, off, on, (on - off) / off * 100 }'
done
