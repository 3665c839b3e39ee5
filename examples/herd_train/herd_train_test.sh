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
#       restart      on RANKS ranks (default 2), with --checkpoint and
#                    --commit-every 5 (20 steps per epoch): the last rank
#                    kills itself (SIGKILL) mid-epoch on the first launch,
#                    the job is launched again with HERD_RESTART_COUNT=1
#                    (as herdrun --max-restarts does) and ends with the
#                    checksum of an uninterrupted run, having redone at most
#                    one commit interval; also a kill at the end of an epoch
#                    (before its checkpoint) and one before the first commit
#                    (a stale checkpoint of another run is not resumed); with
#                    HERDRUN set, the same through herdrun --max-restarts 2;
#                    and a kill mid-epoch with --kvstore dist_sync (the
#                    store's optimizer states, one file per commit)
#       bad_options  each misuse fails with its message: --kvstore local on 2
#                    ranks, --gradient-compression with local or horovod,
#                    --communication async with a synchronous --kvstore and
#                    sync with dist_async, dist_async without servers, a
#                    2-bit threshold of 0, --slow-rank past the
#                    workers, --resume without or with a corrupt checkpoint,
#                    a --progress other than auto, always, never and a
#                    negative --progress-interval, --max-test-samples with
#                    --val-data
#       kvstore_sync on RANKS ranks: every synchronous KVStore type against
#                    the allreduce path (--kvstore horovod) as the
#                    independent reference: local and device on 1 process,
#                    dist_sync and dist_device_sync on RANKS, identical
#                    checksums (same sums, same rescaling by a power of two
#                    or 1/ranks, same schedule); with --gradient-accumulation
#                    3 (a rescaling by 1/(3 ranks) instead of 1/3 then
#                    1/ranks) the parameter norms agree within 1e-6; a
#                    dist_sync checkpoint resumes bitwise and is refused by
#                    horovod; 2-bit compression still learns
#       kvstore_async dist_async with parameter-server ranks: 1 worker with
#                    1 server, and with 2 servers splitting every large key,
#                    ends with the checksum of horovod on 1 process (one
#                    worker's pushes applied in order are its own updates);
#                    2 workers with 1 server learn (test accuracy >= 75%
#                    after 300 steps, where synchronous training reaches
#                    about 83%), also with 2-bit compression (>= 60%); a
#                    --num-servers that contradicts HERD_NUM_SERVERS or
#                    DMLC_NUM_SERVER, servers
#                    for a synchronous --kvstore and --checkpoint with
#                    dist_async each fail with a message
#       progress     2 ranks, stderr a pipe: --progress auto writes rank 0's
#                    progress lines (one per --progress-interval, no
#                    carriage return, each step once: no other rank's);
#                    always redraws in place; never, --quiet and
#                    HERD_PROGRESS=never write none
#       straggler    benchmarks/straggler.sh (HERD_BUILD_DIR: the build
#                    folder) for 20 steps: a table row per engine and speed,
#                    every worker's steps/s, a percentage and an accuracy
#                    (the rates are the benchmark's, not checked here)
#       rec          2 ranks (HERD_REC: the herd-rec program): herd-rec pack
#                    turns Fashion-MNIST's IDX files into train.rec and
#                    test.rec; herd-train --data train.rec --val-data
#                    test.rec ends with the checksum and the loss and
#                    accuracy lines of herd-train from the IDX files with
#                    --data-sharding parts (the same samples in the same
#                    order), by index (.idx beside the files) and by byte
#                    range (without them: parts of equal-size records split
#                    at the same record); for 30 steps of 2 epochs, and one
#                    whole epoch whose parts end in a padded batch; IDX
#                    training with --val-data test.rec as well
#       rec_small    2 ranks, small .rec files written here (no dataset
#                    needed): by index and by byte range, 3 ranks too, the
#                    same checksum; a run resumed from a checkpoint at an
#                    epoch's end, and one relaunched after a kill within an
#                    epoch, end with the uninterrupted checksum; each bad
#                    input ends the job with its
#                    message on every rank, each rank exiting non-zero: a
#                    record of another size, a label that is no class, a
#                    record too short for its header, broken framing, an
#                    .idx offset that is no record head (these found
#                    mid-epoch by the rank whose part holds them, which ends
#                    the job with herd::fail: every other rank names it by
#                    host and pid), also a bad label and broken framing in
#                    the middle of the file and of the middle rank's part of
#                    3; a part with no records, a missing file, test records
#                    of another size; --data-sharding strided with --data is
#                    refused
# Runs whose checks read checksums, norms or messages but no accuracy (and
# straggler, which checks that its table has an accuracy column, not its
# value) evaluate only the first 500 test samples ($few_tests:
# --max-test-samples), a twentieth of the evaluation's cost.
# Exits 77 (skipped) when herd-train reports the dataset missing.
set -uo pipefail

mode="$1"
train="$2"
read -r -a mpirun <<<"$3"
ranks="${4:-2}"
work="$(mktemp -d)"
few_tests=(--max-test-samples 500)
# When a rank fails (bad options, a kill, a bad record), Open MPI's mpirun
# ends the others with SIGTERM and waits odls_base_sigkill_timeout (1 s)
# before its SIGKILL; herd-train handles no SIGTERM, so the wait only adds
# a second or two to every failing run.
export OMPI_MCA_odls_base_sigkill_timeout=0
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
  if [[ -n "${each_rank_exits:-}" ]]; then
    # Each rank's exit status as a line of its own: "rank exited N".
    "${mpirun[@]}" "$ranks" sh -c '"$@"; echo "rank exited $?"' sh "$train" --quiet "$@" \
      >"$work/out" 2>&1
  else
    "${mpirun[@]}" "$ranks" "$train" --quiet "$@" >"$work/out" 2>&1
  fi
  rc=$?
  cat "$work/out"
  if [[ $rc -eq 77 ]] || grep -q "dataset-fashion-mnist" "$work/out"; then
    echo "SKIP: Fashion-MNIST is not installed" >&2
    exit 77
  fi
}

checksum() { sed -n 's/^checksum: \([0-9a-f]*\)$/\1/p' "$work/out"; }
norm() { sed -n 's/^parameter norm: //p' "$work/out"; }
# The test accuracy of the last epoch line, in percent.
accuracy() { awk '$1 ~ /^[0-9]+$/ && $3 ~ /%$/ {a = $3} END {sub(/%/, "", a); print a}' "$work/out"; }

# Runs on $1 ranks (the rest: arguments), expects success; the checksum in $sum.
run_ok() {
  run "$@"
  [[ $rc -eq 0 ]] || fail "herd-train $* exited $rc"
  sum="$(checksum)"
  [[ -n "$sum" ]] || fail "herd-train $* printed no checksum"
}

# same_as_horovod RANKS KVSTORE ARGS...: --kvstore KVSTORE on RANKS ranks
# ends with the checksum of --kvstore horovod with the same ARGS.
same_as_horovod() {
  local ranks="$1" kvstore="$2"
  shift 2
  run_ok "$ranks" --kvstore horovod "$@" "${common[@]}"
  local expected="$sum"
  run_ok "$ranks" --kvstore "$kvstore" "$@" "${common[@]}"
  echo "--kvstore $kvstore $* on $ranks: $sum, horovod: $expected"
  [[ "$sum" == "$expected" ]] ||
    fail "--kvstore $kvstore $* on $ranks ranks: checksum $sum != horovod's $expected"
}

# restart_case KILL_AT: the last rank kills itself after update KILL_AT on
# launch 0, launch 1 resumes; the checksum must be $whole and the resumed
# step within one commit interval (5) before KILL_AT.
restart_case() {
  local kill_at="$1" victim=$((ranks - 1))
  HERD_RESTART_COUNT=0 run "$ranks" "${common[@]}" --kill-rank "$victim" --kill-at-step "$kill_at"
  [[ $rc -ne 0 ]] || fail "launch 0 with --kill-at-step $kill_at exited 0"
  grep -q "rank $victim: --kill-rank: SIGKILL after step $kill_at" "$work/out" ||
    fail "rank $victim did not kill itself after step $kill_at"
  HERD_RESTART_COUNT=1 run_ok "$ranks" "${common[@]}" --kill-rank "$victim" --kill-at-step "$kill_at"
  local resumed_at
  resumed_at="$(sed -n 's/.*resumed from .* (step \([0-9]*\),.* on launch 1$/\1/p' "$work/out")"
  [[ -n "$resumed_at" ]] || resumed_at=0  # killed before the first commit: started over
  echo "killed after step $kill_at, resumed at step $resumed_at: $sum, uninterrupted: $whole"
  [[ "$sum" == "$whole" ]] || fail "killed after step $kill_at: checksum $sum != uninterrupted $whole"
  ((resumed_at <= kill_at && resumed_at >= kill_at - 5)) ||
    fail "killed after step $kill_at, resumed at step $resumed_at: more than one commit interval redone"
}

# Runs and expects failure with a message matching $2 (the rest: arguments).
expect_failure() {
  local ranks="$1" pattern="$2"
  shift 2
  run "$ranks" "$@"
  [[ $rc -ne 0 ]] || fail "herd-train $* exited 0"
  grep -q -- "$pattern" "$work/out" || fail "herd-train $* did not say '$pattern'"
  echo "ok: herd-train $* failed (exit $rc) saying '$pattern'"
}

# make_rec OUT COUNT PIXELS [KEY=VALUE...]: a .rec file of COUNT image
# records (MXNet's header, label k mod 10, then PIXELS bytes), written here
# from the format's description; idx=1 writes OUT's .idx too. Faults:
# size_at=K (record K has one pixel less), label_at=K (label 12),
# short_at=K (record K is 8 bytes, no header), magic_at=K (record K's magic
# word broken).
make_rec() {
  /usr/bin/python3 - "$@" <<'PY'
import struct, sys
out, count, pixels = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
opts = dict(a.split("=") for a in sys.argv[4:])
at = lambda name: int(opts.get(name, -1))
data, index = bytearray(), []
for k in range(count):
    label = 12.0 if k == at("label_at") else float(k % 10)
    n = pixels - 1 if k == at("size_at") else pixels
    payload = struct.pack("<IfQQ", 0, label, k, 0) + bytes((k * 31 + i * 7) % 200 for i in range(n))
    if k == at("short_at"):
        payload = bytes(range(8))
    index.append((k, len(data)))
    magic = 0xDEADBEEF if k == at("magic_at") else 0xCED7230A
    data += struct.pack("<II", magic, len(payload)) + payload + bytes(-len(payload) % 4)
open(out, "wb").write(data)
if opts.get("idx") == "1":
    stem = out[:-4] if out.endswith(".rec") else out
    open(stem + ".idx", "w").write("".join(f"{k}\t{o}\n" for k, o in index))
PY
}

# Runs and expects failure with a message matching $2 on every rank of $1
# (each rank's "herd-train: rank R: ..." line holds it) and a non-zero exit
# status on every rank. A bad record found mid-epoch ends the job through
# herd::fail, after which no rank finalizes MPI: mpirun runs with
# --enable-recovery, so that it lets every rank report before it ends the
# job (its own exit status is then 0, so each rank's is read).
expect_failure_everywhere() {
  local ranks="$1" pattern="$2"
  shift 2
  local plain=("${mpirun[@]}")
  mpirun=("${plain[@]:0:${#plain[@]}-1}" --enable-recovery --mca orte_abort_on_non_zero_status 0
          "${plain[-1]}")
  each_rank_exits=1 run "$ranks" "$@"
  mpirun=("${plain[@]}")
  local failed
  failed="$(grep -c '^rank exited [1-9]' "$work/out")"
  [[ "$failed" -eq "$ranks" ]] || fail "herd-train $*: $failed of $ranks ranks exited non-zero"
  local r
  for ((r = 0; r < ranks; ++r)); do
    grep -q -- "herd-train: rank $r: .*$pattern" "$work/out" ||
      fail "herd-train $*: rank $r did not say '$pattern'"
  done
  echo "ok: herd-train $* failed on all $ranks ranks saying '$pattern'"
}

# named_by_the_others RANKS FAILING PATTERN: after expect_failure_everywhere,
# rank FAILING ended the job with herd::fail mid-epoch, and every other
# rank's message names it by host and pid before its message (PATTERN).
named_by_the_others() {
  local ranks="$1" failing="$2" pattern="$3" r
  grep -q -- "ERROR: herd::fail: rank $failing (host [^,]*, pid [0-9]*): .*$pattern" "$work/out" ||
    fail "rank $failing did not end the job with herd::fail saying '$pattern'"
  for ((r = 0; r < ranks; ++r)); do
    ((r == failing)) && continue
    grep -q -- "herd-train: rank $r: .*rank $failing (host [^,]*, pid [0-9]*): .*$pattern" \
      "$work/out" || fail "rank $r did not name rank $failing with '$pattern'"
  done
  echo "ok: rank $failing ended the job mid-epoch; every other rank named it"
}

# The epoch lines without the rate and the time: epoch, loss, accuracy.
epoch_lines() { awk '$1 ~ /^[0-9]+$/ && NF == 5 {print $1, $2, $3}' "$work/out"; }

case "$mode" in
  smoke)
    run 2 --epochs 1 --max-steps-per-epoch 50
    [[ $rc -eq 0 ]] || fail "exit $rc"
    grep -Eq '^ +1 +[0-9.]+ +[0-9.]+% ' "$work/out" || fail "no epoch line with a test accuracy"
    ;;
  resume)
    # constant: a cosine schedule ends at --epochs, which differs between the runs.
    common=(--max-steps-per-epoch 20 --print-checksum --seed 7 --lr-schedule constant
            "${few_tests[@]}")
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
  restart)
    common=(--epochs 2 --max-steps-per-epoch 20 --print-checksum --seed 7
            --checkpoint "$work/ckpt" --commit-every 5 "${few_tests[@]}")
    run_ok "$ranks" "${common[@]}"
    whole="$sum"
    # The uninterrupted run's checkpoint stays: launch 0 must not resume it.
    restart_case 3
    restart_case 28
    restart_case 20
    if [[ -n "${HERDRUN:-}" ]]; then
      "$HERDRUN" -np "$ranks" --oversubscribe --max-restarts 2 "$train" --quiet "${common[@]}" \
        --kill-rank $((ranks - 1)) --kill-at-step 33 >"$work/out" 2>&1
      rc=$?
      cat "$work/out"
      [[ $rc -eq 0 ]] || fail "herdrun --max-restarts 2: exit $rc"
      [[ "$(checksum)" == "$whole" ]] || fail "herdrun --max-restarts 2: checksum $(checksum) != $whole"
      grep -q "resumed from .* (step 30, .* on launch 1" "$work/out" ||
        fail "herdrun --max-restarts 2: launch 1 did not resume at step 30"
    fi
    # A KVStore keeps its optimizer states in a file per commit beside the
    # checkpoint; only the last commit's stays.
    common+=(--kvstore dist_sync --optimizer adam --learning-rate 0.001)
    run_ok "$ranks" "${common[@]}"
    whole="$sum"
    restart_case 28
    states=("$work"/ckpt.kvstore-step*)
    [[ ${#states[@]} -eq 1 && "${states[0]}" == "$work/ckpt.kvstore-step40" ]] ||
      fail "dist_sync: KVStore states files ${states[*]}, expected only ckpt.kvstore-step40"
    ;;
  bad_options)
    expect_failure 2 "--commit-every 5 needs --checkpoint" --commit-every 5
    expect_failure 2 "--kill-rank 2 is not a worker" --kill-rank 2 --kill-at-step 1
    expect_failure 2 "kvstore local trains in a single process" --kvstore local --epochs 1
    expect_failure 1 "--gradient-compression 2bit compresses what a worker sends" \
      --kvstore local --gradient-compression 2bit
    expect_failure 2 "but --kvstore is horovod" --gradient-compression 1bit
    expect_failure 2 "--communication async needs --kvstore dist_async" \
      --kvstore dist_sync --communication async
    expect_failure 2 "dist_async needs parameter-server ranks" --communication async
    expect_failure 2 "--kvstore dist_async is asynchronous, but --communication is sync" \
      --kvstore dist_async --communication sync
    expect_failure 2 "--gradient-compression 2bit needs --compression-threshold > 0" \
      --kvstore dist_sync --gradient-compression 2bit --compression-threshold 0
    expect_failure 2 "--slow-rank 2 is not a worker" --slow-rank 2
    head -c 100 /dev/urandom >"$work/corrupt"
    expect_failure 2 "$work/corrupt" --epochs 1 --checkpoint "$work/corrupt" --resume
    expect_failure 1 "needs --checkpoint" --resume
    expect_failure 1 "--progress: sometimes not in {auto,always,never}" --progress sometimes
    expect_failure 1 "--progress-interval: Value -1 not in range" --progress-interval -1
    expect_failure 1 "--max-test-samples 500 limits the IDX test set, but --val-data" \
      "${few_tests[@]}" --val-data "$work/corrupt"
    ;;
  kvstore_sync)
    common=(--epochs 2 --max-steps-per-epoch 20 --print-checksum --seed 7 "${few_tests[@]}")
    same_as_horovod 1 local
    same_as_horovod 1 device --optimizer adam --learning-rate 0.001
    same_as_horovod "$ranks" dist_sync
    same_as_horovod "$ranks" dist_device_sync --weight-decay 0.001 --lr-schedule step \
      --lr-step-epochs 1
    same_as_horovod "$ranks" dist_sync --gradient-accumulation 2 --optimizer adam \
      --learning-rate 0.001
    # k = 3: horovod scales by 1/3 before the sum and by 1/ranks after it,
    # the store by 1/(3 ranks) after it; a few roundings apart.
    run_ok "$ranks" --kvstore horovod --gradient-accumulation 3 "${common[@]}"
    expected="$(norm)"
    run_ok "$ranks" --kvstore dist_sync --gradient-accumulation 3 "${common[@]}"
    echo "--gradient-accumulation 3: parameter norm $(norm), horovod's $expected"
    awk -v a="$(norm)" -v b="$expected" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(d <= 1e-6 * b)}' ||
      fail "--gradient-accumulation 3: dist_sync's parameter norm $(norm) != horovod's $expected"

    # Resume: the store's optimizer states (and its update count) come back.
    resume_args=(--kvstore dist_sync --optimizer adam --learning-rate 0.001 --lr-schedule constant)
    run_ok "$ranks" --epochs 2 "${common[@]:2}" "${resume_args[@]}"
    whole="$sum"
    run_ok "$ranks" --epochs 1 --checkpoint "$work/ckpt" "${common[@]:2}" "${resume_args[@]}"
    [[ "$sum" != "$whole" ]] || fail "dist_sync: the second epoch changed nothing"
    run_ok "$ranks" --epochs 2 --checkpoint "$work/ckpt" --resume "${common[@]:2}" "${resume_args[@]}"
    echo "dist_sync resumed: $sum, uninterrupted: $whole"
    [[ "$sum" == "$whole" ]] || fail "dist_sync resumed checksum $sum != uninterrupted $whole"
    expect_failure "$ranks" "written with --kvstore dist_sync" --kvstore horovod --optimizer adam \
      --epochs 3 --checkpoint "$work/ckpt" --resume "${common[@]:2}"

    # 2-bit compression: fewer bits, still learning (1 epoch of 200 steps
    # reaches about 75%; chance is 10%).
    run "$ranks" --kvstore dist_sync --gradient-compression 2bit --compression-threshold 0.5 \
      --epochs 1 --max-steps-per-epoch 200
    [[ $rc -eq 0 ]] || fail "dist_sync with 2-bit compression: exit $rc"
    grep -q "gradient compression 2bit (threshold 0.5)" "$work/out" || fail "no compression in the banner"
    awk -v a="$(accuracy)" 'BEGIN {exit !(a >= 60)}' ||
      fail "dist_sync with 2-bit compression: test accuracy $(accuracy)% < 60%"
    ;;
  kvstore_async)
    common=(--epochs 2 --max-steps-per-epoch 20 --print-checksum --seed 7 --optimizer adam
            --learning-rate 0.001 "${few_tests[@]}")
    run_ok 1 --kvstore horovod "${common[@]}"
    expected="$sum"
    run_ok 2 --kvstore dist_async --num-servers 1 "${common[@]}"
    grep -q "dist_async (parameter servers, 1 server)" "$work/out" || fail "no engine in the banner"
    echo "dist_async, 1 worker, 1 server: $sum, horovod on 1 process: $expected"
    [[ "$sum" == "$expected" ]] || fail "dist_async 1 worker 1 server: $sum != horovod's $expected"
    HERD_KVSTORE_BIGARRAY_BOUND=1000 run_ok 3 --communication async --num-servers 2 "${common[@]}"
    echo "dist_async, 1 worker, 2 servers: $sum, horovod on 1 process: $expected"
    [[ "$sum" == "$expected" ]] || fail "dist_async 1 worker 2 servers: $sum != horovod's $expected"

    for compression in none 2bit; do
      bound=75
      [[ "$compression" == none ]] || bound=60
      run 3 --kvstore dist_async --num-servers 1 --epochs 1 --max-steps-per-epoch 300 \
        --gradient-compression "$compression" --print-step-rates
      [[ $rc -eq 0 ]] || fail "dist_async, 2 workers, compression $compression: exit $rc"
      grep -Eq '^steps/s: [0-9.]+ [0-9.]+$' "$work/out" || fail "no steps/s of the 2 workers"
      echo "dist_async, 2 workers, compression $compression: $(accuracy)%"
      awk -v a="$(accuracy)" -v b="$bound" 'BEGIN {exit !(a >= b)}' ||
        fail "dist_async, compression $compression: test accuracy $(accuracy)% < $bound%"
    done

    HERD_NUM_SERVERS=1 expect_failure 3 "--num-servers 2 contradicts HERD_NUM_SERVERS=1" \
      --kvstore dist_async --num-servers 2
    DMLC_NUM_SERVER=1 expect_failure 3 "--num-servers 2 contradicts DMLC_NUM_SERVER=1" \
      --kvstore dist_async --num-servers=2
    expect_failure 3 "--num-servers 1 serves only --kvstore dist_async" \
      --kvstore dist_sync --num-servers 1
    expect_failure 3 "the optimizer state lives on the parameter servers" \
      --kvstore dist_async --num-servers 1 --checkpoint "$work/ckpt"
    ;;
  straggler)
    script="$(dirname "${BASH_SOURCE[0]}")/../../benchmarks/straggler.sh"
    STRAGGLER_DEVICE_MS=1 "$script" "$work/logs" -- --epochs 1 --max-steps-per-epoch 20 \
      "${few_tests[@]}" >"$work/table" 2>"$work/err"
    rc=$?
    cat "$work/table" "$work/err"
    [[ $rc -ne 77 ]] || exit 77
    [[ $rc -eq 0 ]] || fail "straggler.sh exited $rc"
    row='^\| [a-z_, 0-9]+ \| (full|1/2) speed \|( [0-9.]+ \|){3} [0-9]+% \| [0-9.]+% \|$'
    rows="$(grep -Ec "$row" "$work/table")"
    [[ "$rows" -eq 6 ]] || fail "straggler.sh printed $rows table rows, expected 6"
    for engine in horovod dist_sync "dist_async, 1 server"; do
      [[ "$(grep -c "^| $engine |" "$work/table")" -eq 2 ]] || fail "no two rows of $engine"
    done
    for engine in horovod dist_sync dist_async; do
      grep -q "worker 2 slowed: its compute takes 2 x as long" "$work/logs/$engine-slowed.log" ||
        fail "the slowed $engine run does not say that worker 2 is slowed"
      ! grep -q "slowed" "$work/logs/$engine-unslowed.log" ||
        fail "the unslowed $engine run says a worker is slowed"
    done
    ;;
  progress)
    # Runs 2 ranks of 40 steps of at least 20 ms each with stderr a pipe;
    # stdout in $work/out, stderr in $work/err.
    run_piped() {
      "${mpirun[@]}" 2 "$train" --epochs 1 --max-steps-per-epoch 40 --device-ms 20 \
        --progress-interval 0.2 "${few_tests[@]}" "$@" >"$work/out" 2> >(cat >"$work/err")
      rc=$?
      wait
      cat "$work/out" "$work/err"
      [[ $rc -ne 77 ]] && ! grep -q "dataset-fashion-mnist" "$work/out" "$work/err" || exit 77
      [[ $rc -eq 0 ]] || fail "herd-train $* exited $rc"
    }
    line='^epoch 1/1 step [0-9]+/40 \([0-9]+%\) loss [0-9.]+ [0-9]+ samples/s$'
    run_piped --progress auto
    lines="$(grep -Ec "$line" "$work/err")"
    [[ "$lines" -ge 2 ]] || fail "--progress auto wrote $lines progress lines, expected 2 or more"
    ! grep -q $'\r' "$work/err" || fail "--progress auto wrote a carriage return into a pipe"
    steps="$(grep -E "$line" "$work/err" | sed 's/^epoch 1\/1 step \([0-9]*\)\/.*/\1/')"
    [[ "$steps" == "$(sort -n -u <<<"$steps")" ]] ||
      fail "progress steps not increasing (more than rank 0 wrote): $steps"
    run_piped --progress always
    grep -q $'\repoch 1/1 step [0-9]*/40 .*\033\[K' "$work/err" ||
      fail "--progress always did not redraw in place"
    for quiet in "--progress never" "--quiet"; do
      # shellcheck disable=SC2086
      run_piped $quiet
      ! grep -q "epoch 1/1 step" "$work/err" || fail "$quiet wrote progress"
    done
    HERD_PROGRESS=never run_piped
    ! grep -q "epoch 1/1 step" "$work/err" || fail "HERD_PROGRESS=never wrote progress"
    ;;
  rec)
    [[ -x "${HERD_REC:-}" ]] || fail "HERD_REC must name the herd-rec program"
    fashion="/usr/share/datasets/fashion-mnist"
    if [[ ! -f "$fashion/train-images-idx3-ubyte.gz" ]]; then
      echo "SKIP: Fashion-MNIST is not installed" >&2
      exit 77
    fi
    for split in train:train t10k:test; do
      "$HERD_REC" pack --idx-images "$fashion/${split%%:*}-images-idx3-ubyte.gz" \
        --idx-labels "$fashion/${split%%:*}-labels-idx1-ubyte.gz" -o "$work/${split##*:}.rec" ||
        fail "herd-rec pack of $split failed"
    done
    # Equal records: 8 bytes of framing, the 24-byte header, 784 pixels.
    [[ "$(stat -c %s "$work/train.rec")" -eq $((60000 * 816)) ]] || fail "train.rec's size"
    rec_vs_idx() {
      run_ok 2 --data-sharding parts "$@"
      expected="$sum"
      expected_lines="$(epoch_lines)"
      [[ -n "$expected_lines" ]] || fail "IDX run $*: no epoch lines"
      for how in index byte_range; do
        if [[ "$how" == byte_range ]]; then
          mv "$work/train.idx" "$work/train.idx.kept"
          mv "$work/test.idx" "$work/test.idx.kept"
        fi
        run_ok 2 --data "$work/train.rec" --val-data "$work/test.rec" "$@"
        grep -q "train: $work/train.rec by ${how/_/ }" "$work/out" || fail "not read by ${how/_/ }"
        echo "$* by $how: $sum, $(epoch_lines | tr '\n' ' '); IDX: $expected"
        [[ "$sum" == "$expected" ]] || fail ".rec by $how $*: checksum $sum != IDX's $expected"
        [[ "$(epoch_lines)" == "$expected_lines" ]] ||
          fail ".rec by $how $*: epoch lines differ from IDX's: $expected_lines"
      done
      mv "$work/train.idx.kept" "$work/train.idx"
      mv "$work/test.idx.kept" "$work/test.idx"
    }
    rec_vs_idx --epochs 2 --max-steps-per-epoch 30 --print-checksum --seed 7
    # IDX training with the test set from test.rec: the same again.
    run_ok 2 --data-sharding parts --val-data "$work/test.rec" --epochs 2 --max-steps-per-epoch 30 \
      --print-checksum --seed 7
    grep -q "test: $work/test.rec by index" "$work/out" || fail "--val-data alone: not read"
    [[ "$sum" == "$expected" && "$(epoch_lines)" == "$expected_lines" ]] ||
      fail "IDX training with --val-data test.rec: $sum, $(epoch_lines) != IDX's"
    # 30000 samples per part at batch 128: 235 steps, the last padded by
    # 80 samples from the part's start.
    rec_vs_idx --epochs 1 --batch-size 128 --print-checksum --seed 3 --data-threads 2
    grep -q "  235 steps per epoch" "$work/out" || fail "not 235 steps per epoch"
    ;;
  rec_small)
    common=(--epochs 1 --print-checksum --seed 5 --hidden 8 --batch-size 4)
    # 41 records of 16 pixels: parts 21 and 20 both ways (3 ranks: 14, 14, 13).
    make_rec "$work/a.rec" 41 16 idx=1
    make_rec "$work/v.rec" 10 16
    for ranks in 2 3; do
      run_ok "$ranks" --data "$work/a.rec" --val-data "$work/v.rec" "${common[@]}"
      grep -q "a.rec by index ($work/a.idx), 41 records of 16 pixels" "$work/out" ||
        fail "a.rec not read by index"
      indexed="$sum"
      mv "$work/a.idx" "$work/a.idx.kept"
      run_ok "$ranks" --data "$work/a.rec" --val-data "$work/v.rec" "${common[@]}"
      mv "$work/a.idx.kept" "$work/a.idx"
      grep -q "a.rec by byte range, 41 records" "$work/out" || fail "a.rec not read by byte range"
      echo "$ranks ranks: by index $sum, by byte range $indexed"
      [[ "$sum" == "$indexed" ]] || fail "$ranks ranks: by byte range $sum != by index $indexed"
    done
    # Resumed at the end of epoch 1, and relaunched after a kill in epoch 2
    # (6 steps per epoch; the commit after update 8 is 2 batches into it).
    data=(--data "$work/a.rec" --val-data "$work/v.rec" --lr-schedule constant)
    run_ok 2 "${data[@]}" "${common[@]:2}" --epochs 2
    whole="$sum"
    run_ok 2 "${data[@]}" "${common[@]:2}" --epochs 1 --checkpoint "$work/ckpt"
    [[ "$sum" != "$whole" ]] || fail ".rec: the second epoch changed nothing"
    run_ok 2 "${data[@]}" "${common[@]:2}" --epochs 2 --checkpoint "$work/ckpt" --resume
    echo ".rec resumed after epoch 1: $sum, uninterrupted: $whole"
    [[ "$sum" == "$whole" ]] || fail ".rec resumed: checksum $sum != uninterrupted $whole"
    rm -f "$work/ckpt"
    restart=("${data[@]}" "${common[@]:2}" --epochs 2 --checkpoint "$work/ckpt" --commit-every 2
             --kill-rank 1 --kill-at-step 9)
    HERD_RESTART_COUNT=0 run 2 "${restart[@]}"
    [[ $rc -ne 0 ]] || fail ".rec: launch 0 with --kill-at-step 9 exited 0"
    HERD_RESTART_COUNT=1 run_ok 2 "${restart[@]}"
    grep -q "resumed from .* at epoch 2, batch 2 (step 8," "$work/out" ||
      fail ".rec: launch 1 did not resume at epoch 2, batch 2"
    echo ".rec relaunched after a kill at step 9: $sum, uninterrupted: $whole"
    [[ "$sum" == "$whole" ]] || fail ".rec relaunched: checksum $sum != uninterrupted $whole"

    # Without --val-data there is no accuracy.
    run_ok 2 --data "$work/a.rec" "${common[@]}"
    grep -Eq '^ +1 +[0-9.]+ +- +[0-9]+ ' "$work/out" || fail "no epoch line without accuracy"

    # Bad training records are found when their batch is read, mid-epoch, by
    # the rank whose part holds them (parts 0-20 and 21-40), which ends the
    # job with herd::fail.
    make_rec "$work/size.rec" 41 16 size_at=30
    expect_failure_everywhere 2 "size.rec at byte $((30 * 48)): the record holds 15 bytes of pixels" \
      --data "$work/size.rec" "${common[@]}"
    named_by_the_others 2 1 "size.rec at byte $((30 * 48)): the record holds 15 bytes"
    make_rec "$work/label.rec" 41 16 label_at=3 idx=1
    expect_failure_everywhere 2 "label.rec at byte 144: label 12 is not a class" \
      --data "$work/label.rec" "${common[@]}"
    named_by_the_others 2 0 "label.rec at byte 144: label 12 is not a class"
    make_rec "$work/short.rec" 41 16 short_at=40
    expect_failure_everywhere 2 "short.rec at byte 1920" --data "$work/short.rec" "${common[@]}"
    make_rec "$work/magic.rec" 41 16 magic_at=35 idx=1
    expect_failure_everywhere 2 "magic.rec.* $((35 * 48))" --data "$work/magic.rec" "${common[@]}"
    named_by_the_others 2 1 "magic.rec' at byte $((35 * 48)): not a record head"
    # A record in the middle of the file and of the middle rank's part (parts
    # 0-13, 14-27, 28-40 of 3), by index and by byte range: its label, then
    # its framing by index (by byte range the part's framing is read when the
    # part is opened, before the first step).
    make_rec "$work/mid.rec" 41 16 label_at=20 idx=1
    for how in index range; do
      [[ $how == range ]] && mv "$work/mid.idx" "$work/mid.idx.kept"
      expect_failure_everywhere 3 "mid.rec at byte $((20 * 48)): label 12 is not a class" \
        --data "$work/mid.rec" "${common[@]}"
      named_by_the_others 3 1 "mid.rec at byte $((20 * 48)): label 12 is not a class"
      grep -q "mid.rec by $([[ $how == index ]] && echo index || echo "byte range")" "$work/out" ||
        fail "mid.rec not read by $how"
    done
    make_rec "$work/midframe.rec" 41 16 magic_at=20 idx=1
    expect_failure_everywhere 3 "midframe.rec' at byte $((20 * 48)): not a record head" \
      --data "$work/midframe.rec" "${common[@]}"
    named_by_the_others 3 1 "midframe.rec' at byte $((20 * 48)): not a record head"
    make_rec "$work/one.rec" 1 16
    expect_failure_everywhere 2 "one.rec: part 1 of 2 (one per worker) holds no records; the parts hold 1, 0" \
      --data "$work/one.rec" "${common[@]}"
    expect_failure_everywhere 2 "$work/missing.rec" --data "$work/missing.rec" "${common[@]}"
    make_rec "$work/v12.rec" 10 12
    expect_failure_everywhere 2 "v12.rec's records hold 12 pixels, but .*a.rec's hold 16" \
      --data "$work/a.rec" --val-data "$work/v12.rec" "${common[@]}"
    expect_failure 2 "--data-sharding strided with --data" --data "$work/a.rec" \
      --data-sharding strided
    ;;
  *) fail "unknown mode $mode" ;;
esac
echo "PASS: $mode"
