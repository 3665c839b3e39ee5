#!/usr/bin/env bash
# herd.torch.elastic across a relaunch (registered by CMakeLists.txt here):
#   elastic_restart_test.sh PYTHON "MPIRUN FLAGS... NUMPROC_FLAG" RANKS
# elastic_train.py (a TorchState with an ElasticSampler, committed every 4
# steps) runs uninterrupted; then its last rank kills itself (SIGKILL) after a
# given step on the first launch, the job is launched again with
# HERD_RESTART_COUNT=1 (as herdrun --max-restarts does), and it must end with
# the uninterrupted run's parameters, bit for bit, having resumed at most one
# commit interval before the kill: mid-epoch, at the end of an epoch, and
# before the first commit (the uninterrupted run's commit file is still there
# and must not be resumed). With HERDRUN set, the same through
# herdrun --max-restarts 2.
set -uo pipefail

python="$1"
read -r -a mpirun <<<"$2"
ranks="$3"
script="$(dirname "${BASH_SOURCE[0]}")/elastic_train.py"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export HERD_ELASTIC_DIR="$work/state"
commit_every=4

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Runs the script on $ranks ranks with the arguments given; output in
# $work/out, exit status in $rc.
run() {
  "${mpirun[@]}" "$ranks" "$python" "$script" --commit-every "$commit_every" "$@" \
    >"$work/out" 2>&1
  rc=$?
  cat "$work/out"
}

digest() { sed -n 's/^params: \([0-9a-f]*\)$/\1/p' "$work/out"; }

run
[[ $rc -eq 0 ]] || fail "uninterrupted run: exit $rc"
whole="$(digest)"
[[ -n "$whole" ]] || fail "uninterrupted run printed no parameter digest"
[[ -f "$HERD_ELASTIC_DIR/state.pt" ]] || fail "no commit file in $HERD_ELASTIC_DIR"

# restart_case KILL_AT: launch 0 loses its last rank after step KILL_AT,
# launch 1 resumes.
restart_case() {
  local kill_at="$1" victim=$((ranks - 1))
  HERD_RESTART_COUNT=0 run --kill-rank "$victim" --kill-at-step "$kill_at"
  [[ $rc -ne 0 ]] || fail "launch 0 with a kill after step $kill_at exited 0"
  grep -q "rank $victim: SIGKILL after step $kill_at" "$work/out" ||
    fail "rank $victim did not kill itself after step $kill_at"
  HERD_RESTART_COUNT=1 run --kill-rank "$victim" --kill-at-step "$kill_at"
  [[ $rc -eq 0 ]] || fail "launch 1 after a kill after step $kill_at: exit $rc"
  local resumed
  resumed="$(sed -n 's/^start: launch 1 step \([0-9]*\) .*/\1/p' "$work/out")"
  [[ -n "$resumed" ]] || fail "launch 1 did not say where it started"
  echo "killed after step $kill_at, resumed at step $resumed: $(digest), uninterrupted: $whole"
  [[ "$(digest)" == "$whole" ]] ||
    fail "killed after step $kill_at: parameters $(digest) != uninterrupted $whole"
  ((resumed <= kill_at && resumed > kill_at - commit_every)) ||
    fail "killed after step $kill_at, resumed at step $resumed: more than one commit interval redone"
}

# Steps per epoch: 13 at 2 ranks, 9 at 3 (200 samples, batches of 8).
per_epoch=$(((200 + ranks - 1) / ranks))
per_epoch=$(((per_epoch + 7) / 8))
restart_case 2                       # before the first commit
restart_case $((per_epoch + 5))      # mid-epoch
restart_case $((2 * per_epoch))      # after an epoch's last batch

if [[ -n "${HERDRUN:-}" ]]; then
  "$HERDRUN" -np "$ranks" --oversubscribe --max-restarts 2 "$python" "$script" \
    --commit-every "$commit_every" --kill-rank $((ranks - 1)) --kill-at-step 7 >"$work/out" 2>&1
  rc=$?
  cat "$work/out"
  [[ $rc -eq 0 ]] || fail "herdrun --max-restarts 2: exit $rc"
  [[ "$(digest)" == "$whole" ]] || fail "herdrun --max-restarts 2: parameters $(digest) != $whole"
  grep -q "^start: launch 1 step 4 " "$work/out" ||
    fail "herdrun --max-restarts 2: launch 1 did not resume at step 4"
fi
echo "PASS: elastic restart at $ranks ranks"
