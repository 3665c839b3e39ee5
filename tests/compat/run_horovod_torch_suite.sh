#!/usr/bin/env bash
# Runs Horovod's own test/parallel/test_torch.py against herd.torch, which the
# shim beside this script makes importable as horovod.torch: each test in its
# own 2-rank job (so one hang costs its time limit, not the rest), then a
# summary of passed, skipped (with pytest's reason), failed and hung tests.
# Usage: run_horovod_torch_suite.sh <horovod source: a checkout or a bare git
#        dir> <herd's Python dir, e.g. build/python> [out dir] [pytest -k expr]
# Environment: RANKS (2), TEST_TIMEOUT seconds per test (90), MPIEXEC_FLAGS.
# Needs /usr/bin/python3 with torch, pytest, cloudpickle, mock and packaging
# (Debian: python3-torch python3-pytest python3-cloudpickle python3-mock
# python3-packaging). Exits 1 when a test failed or hung.
set -euo pipefail
if [[ "${1:-}" == -h || "${1:-}" == --help ]]; then
  sed -n '2,${/^#/!q;s/^# \{0,1\}//;p}' "$0"
  exit 0
fi
if [[ $# -lt 2 ]]; then
  echo "usage: run_horovod_torch_suite.sh <horovod source> <herd python dir> [out dir] [-k expr]" >&2
  exit 2
fi
source=$1
herd_python=$(cd "$2" && pwd)
out=${3:-$(mktemp -d)}
filter=${4:-}
ranks=${RANKS:-2}
limit=${TEST_TIMEOUT:-90}
shim=$(cd "$(dirname "$0")/horovod_shim" && pwd)
mkdir -p "$out"
tests=$out/test
rm -rf "$tests"
if [[ -d "$source/test/parallel" ]]; then
  cp -r "$source/test" "$tests"
else  # a bare git directory
  mkdir -p "$out/src"
  git --git-dir="$source" archive HEAD test | tar -x -C "$out/src"
  mv "$out/src/test" "$tests"
  rm -rf "$out/src"
fi
flags=(${MPIEXEC_FLAGS:-})
if [[ $(id -u) == 0 ]]; then flags+=(--allow-run-as-root); fi
flags+=(--oversubscribe)
export PYTHONPATH="$shim:$herd_python" PYTHONDONTWRITEBYTECODE=1
cd "$tests/parallel"
/usr/bin/python3 -m pytest --collect-only -q -p no:cacheprovider ${filter:+-k "$filter"} \
  test_torch.py 2>/dev/null | grep '::' >"$out/ids.txt"
: >"$out/summary.txt"
while read -r id; do
  test=${id##*::}
  status=0
  timeout -k 10 "$limit" mpirun "${flags[@]}" -np "$ranks" -x PYTHONPATH -x PYTHONDONTWRITEBYTECODE \
    /usr/bin/python3 -m pytest -q -rs --color=no -p no:cacheprovider "$id" </dev/null >"$out/$test.log" 2>&1 ||
    status=$?
  if [[ $status == 124 || $status == 137 ]]; then
    verdict=HUNG
  elif [[ $status == 0 ]] && grep -q ' passed' "$out/$test.log"; then
    verdict=PASSED
  elif [[ $status == 0 ]] && grep -q ' skipped' "$out/$test.log"; then
    verdict="SKIPPED $(grep -m1 -o 'SKIPPED \[1\] [^ ]*: .*' "$out/$test.log" | cut -d' ' -f4- || true)"
  else
    verdict=FAILED
  fi
  echo "$verdict $test" | tee -a "$out/summary.txt"
done <"$out/ids.txt"
for verdict in PASSED SKIPPED FAILED HUNG; do
  echo "$verdict: $(grep -c "^$verdict" "$out/summary.txt" || true)"
done
echo "logs: $out"
! grep -q '^\(FAILED\|HUNG\)' "$out/summary.txt"
