#!/usr/bin/env bash
# herd-train's multi-rank tests (registered by CMakeLists.txt here):
#   herd_train_test.sh MODE HERD_TRAIN "MPIRUN FLAGS... NUMPROC_FLAG" [RANKS]
# MODE: smoke        2 ranks, 1 short epoch; exit 0 and a test accuracy line
#       resume       on RANKS ranks (default 2): 2 epochs in one run, twice,
#                    == 1 epoch, checkpoint, --resume for the second
#                    (identical parameter checksums: the allreduces' bits do
#                    not depend on how the runtime fused the gradients); on 2
#                    ranks also --resume of that checkpoint on 3 ranks, which
#                    fails naming both counts
#       bad_options  --communication async, --kvstore local on 2 ranks and a
#                    corrupt checkpoint with --resume each fail with a message
# Exits 77 (skipped) when herd-train reports the dataset missing.
set -uo pipefail

mode="$1"
train="$2"
read -r -a mpirun <<<"$3"
ranks="${4:-2}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# Runs herd-train on $1 ranks with the rest as its arguments; output in
# $work/out, exit status in $rc. Skips the test when the dataset is missing.
run() {
  local ranks="$1"
  shift
  "${mpirun[@]}" "$ranks" "$train" --quiet "$@" >"$work/out" 2>&1
  rc=$?
  cat "$work/out"
  if [[ $rc -eq 77 ]] || grep -q "dataset-fashion-mnist" "$work/out"; then
    echo "SKIP: Fashion-MNIST is not installed" >&2
    exit 77
  fi
}

checksum() { sed -n 's/^checksum: \([0-9a-f]*\)$/\1/p' "$work/out"; }

# Runs and expects failure with a message matching $2 (the rest: arguments).
expect_failure() {
  local ranks="$1" pattern="$2"
  shift 2
  run "$ranks" "$@"
  [[ $rc -ne 0 ]] || fail "herd-train $* exited 0"
  grep -q -- "$pattern" "$work/out" || fail "herd-train $* did not say '$pattern'"
  echo "ok: herd-train $* failed (exit $rc) saying '$pattern'"
}

case "$mode" in
  smoke)
    run 2 --epochs 1 --max-steps-per-epoch 50
    [[ $rc -eq 0 ]] || fail "exit $rc"
    grep -Eq '^ +1 +[0-9.]+ +[0-9.]+% ' "$work/out" || fail "no epoch line with a test accuracy"
    ;;
  resume)
    # constant: a cosine schedule ends at --epochs, which differs between the runs.
    common=(--max-steps-per-epoch 20 --print-checksum --seed 7 --lr-schedule constant)
    run "$ranks" --epochs 2 "${common[@]}"
    [[ $rc -eq 0 ]] || fail "uninterrupted run: exit $rc"
    whole="$(checksum)"
    [[ -n "$whole" ]] || fail "uninterrupted run printed no checksum"
    run "$ranks" --epochs 2 "${common[@]}"
    [[ $rc -eq 0 ]] || fail "second uninterrupted run: exit $rc"
    again="$(checksum)"
    run "$ranks" --epochs 1 --checkpoint "$work/ckpt" "${common[@]}"
    [[ $rc -eq 0 ]] || fail "first half: exit $rc"
    first="$(checksum)"
    [[ -f "$work/ckpt" ]] || fail "no checkpoint written"
    run "$ranks" --epochs 2 --checkpoint "$work/ckpt" --resume "${common[@]}"
    [[ $rc -eq 0 ]] || fail "resumed run: exit $rc"
    resumed="$(checksum)"
    echo "$ranks ranks: uninterrupted $whole and $again, after epoch 1 $first, resumed $resumed"
    [[ "$again" == "$whole" ]] || fail "two uninterrupted runs: checksums $whole and $again"
    [[ "$first" != "$whole" ]] || fail "the second epoch changed nothing"
    [[ "$resumed" == "$whole" ]] || fail "resumed checksum $resumed != uninterrupted $whole"
    if [[ "$ranks" -eq 2 ]]; then
      expect_failure 3 "written by a run of 2 ranks, but this run has 3" \
        --epochs 2 --checkpoint "$work/ckpt" --resume "${common[@]}"
    fi
    ;;
  bad_options)
    expect_failure 2 "not implemented" --communication async --epochs 1
    expect_failure 2 "kvstore local" --kvstore local --epochs 1
    head -c 100 /dev/urandom >"$work/corrupt"
    expect_failure 2 "$work/corrupt" --epochs 1 --checkpoint "$work/corrupt" --resume
    expect_failure 1 "needs --checkpoint" --resume
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "PASS: $mode"
