#!/usr/bin/env bash
# herd-bench's progress on stderr (--progress, -q), at 2 ranks:
#   bench_progress_test.sh HERD_BENCH "MPIRUN FLAGS... NUMPROC_FLAG"
# With stderr a pipe, --progress auto writes one line per path of the step
# benchmark ("[k/N] path", each once: rank 0 alone) and no carriage return;
# --progress always redraws "[k/N] path: step s/S" in place; -q and
# --progress never write neither; the step table reaches stdout each time
# (after the first run, of the herd path alone: --herd-only).
set -uo pipefail

bench="$1"
read -r -a mpirun <<<"$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# herd-bench step with the given options; stdout in $work/out, stderr
# (through a pipe) in $work/err. The table must have a row starting with
# $row: "floor" for the whole benchmark, "herd" for --herd-only.
row=floor
run_step() {
  "${mpirun[@]}" 2 "$bench" step --model resnet50 -n 2 -w 1 "$@" >"$work/out" \
    2> >(cat >"$work/err")
  local rc=$?
  wait
  cat "$work/err"
  [[ $rc -eq 0 ]] || fail "herd-bench step $* exited $rc"
  grep -q "^$row " "$work/out" || fail "herd-bench step $* printed no table"
}

# Every path, for a line per path.
run_step --progress auto
paths="$(grep -Ec '^\[[0-9]+/[0-9]+\] [a-z-]+$' "$work/err")"
total="$(sed -n 's/^\[1\/\([0-9]*\)\] .*/\1/p' "$work/err" | head -n 1)"
[[ -n "$total" && "$paths" -eq "$total" ]] ||
  fail "--progress auto wrote $paths path lines, expected one per path ($total)"
! grep -q $'\r' "$work/err" || fail "--progress auto wrote a carriage return into a pipe"

# The herd path alone suffices for the rest (and takes a tenth of the time).
row=herd
run_step --herd-only --progress always
grep -q $'\r\\[1/[0-9]*\\] [a-z-]*: step [0-9]/3\033\\[K' "$work/err" ||
  fail "--progress always did not redraw the steps in place"

for quiet in "-q" "--progress never"; do
  # shellcheck disable=SC2086
  run_step --herd-only $quiet
  ! grep -q '\[1/' "$work/err" || fail "$quiet wrote progress"
done
echo "PASS"
