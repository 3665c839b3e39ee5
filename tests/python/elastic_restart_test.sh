#!/usr/bin/env bash
# herd.torch.elastic across relaunches (registered by CMakeLists.txt here):
#   elastic_restart_test.sh PYTHON "MPIRUN FLAGS... NUMPROC_FLAG" RANKS
# elastic_train.py (a TorchState with an ElasticSampler, committed every 4
# steps) runs uninterrupted; then one job loses its last rank (SIGKILL) three
# times, once per launch: before the first commit (the uninterrupted run's
# commit file is still there and must not be resumed), mid-epoch, and after an
# epoch's last batch. Every relaunch must resume at most one commit interval
# before the kill, and the job must end with the uninterrupted run's
# parameters, bit for bit. With HERDRUN set, herdrun --max-restarts 3 does the
# relaunching; without it, this script does, with HERD_RESTART_COUNT counting
# the launches as herdrun does.
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

# Steps per epoch: 13 at 2 ranks, 9 at 3 (200 samples, batches of 8).
per_epoch=$(((200 + ranks - 1) / ranks))
per_epoch=$(((per_epoch + 7) / 8))
# Launch L is killed after step kills[L]; launch 3 runs to the end.
kills=(2 $((per_epoch + 5)) $((2 * per_epoch)))
victim=$((ranks - 1))
killed=(--kill-rank "$victim" --kill-at-steps "$(IFS=,; echo "${kills[*]}")")

if [[ -n "${HERDRUN:-}" ]]; then
  "$HERDRUN" -np "$ranks" --oversubscribe --max-restarts 3 "$python" "$script" \
    --commit-every "$commit_every" "${killed[@]}" >"$work/out" 2>&1
  rc=$?
  cat "$work/out"
  [[ $rc -eq 0 ]] || fail "herdrun --max-restarts 3: exit $rc"
  for restart in 1 2 3; do
    grep -q "^herdrun: restart $restart of 3: " "$work/out" ||
      fail "herdrun --max-restarts 3 did not report restart $restart"
  done
  all="$(cat "$work/out")"
else
  all=""
  for launch in 0 1 2 3; do
    HERD_RESTART_COUNT=$launch run "${killed[@]}"
    all+="$(cat "$work/out")"$'\n'
    if ((launch < 3)); then
      [[ $rc -ne 0 ]] || fail "launch $launch, killed after step ${kills[launch]}, exited 0"
    else
      [[ $rc -eq 0 ]] || fail "launch $launch: exit $rc"
    fi
  done
fi

for launch in 0 1 2; do
  kill_at="${kills[launch]}"
  grep -q "rank $victim: SIGKILL after step $kill_at\$" <<<"$all" ||
    fail "rank $victim did not kill itself after step $kill_at on launch $launch"
  resumed="$(sed -n "s/^start: launch $((launch + 1)) step \\([0-9]*\\) .*/\\1/p" <<<"$all")"
  [[ -n "$resumed" ]] || fail "launch $((launch + 1)) did not say where it started"
  echo "killed after step $kill_at, resumed at step $resumed"
  ((resumed <= kill_at && resumed > kill_at - commit_every)) ||
    fail "killed after step $kill_at, resumed at step $resumed: more than one commit interval redone"
done
echo "after 3 relaunches: $(digest), uninterrupted: $whole"
[[ "$(digest)" == "$whole" ]] || fail "after 3 relaunches: parameters $(digest) != uninterrupted $whole"
echo "PASS: elastic restart at $ranks ranks"
