#!/usr/bin/env bash
# herd's RecordIO readers against cat, on a file in the page cache.
#
#   benchmarks/recordio_read.sh [TOTAL [RECORD_SIZE...]]
#
# For each RECORD_SIZE (default: 100K, then 1K), writes a .rec holding TOTAL
# bytes of payload (default 1G) and its .idx under $TMPDIR with
# herd-recordio-bench, reads it twice with cat to bring it into the page
# cache, times `cat FILE > /dev/null` (best of RECORDIO_READ_REPEAT runs,
# default 3) and then herd-recordio-bench read: one row per reader (the
# sequential RecordReader, parts 2 and 4 by byte range and by index on as many
# threads, the prefetcher on 1, 2 and 4 threads holding about 4 MiB of
# records), each the best of as many
# runs, with its share of cat's speed (docs/performance.md, "Reading RecordIO
# files"). Each file is removed before the next is written. Build first
# (scripts/build.sh, or HERD_BUILD_DIR); measure on a machine that runs
# nothing else.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/common.sh"
herd_handle_help "$@"

total="${1:-1G}"
shift || true
sizes=("$@")
if [[ ${#sizes[@]} -eq 0 ]]; then
  sizes=(100K 1K)
fi
repeat="${RECORDIO_READ_REPEAT:-3}"
bench="$HERD_BUILD_DIR/benchmarks/herd-recordio-bench"
if [[ ! -x "$bench" ]]; then
  echo "recordio_read: $bench is missing; run scripts/build.sh first" >&2
  exit 2
fi
dir="$(mktemp -d "${TMPDIR:-/tmp}/herd_recordio_read.XXXXXX")"
trap 'rm -rf "$dir"' EXIT

# The best wall time of $repeat runs of `cat FILE > /dev/null`, in seconds.
cat_seconds() {
  local best="" t
  for ((i = 0; i < repeat; i++)); do
    t="$({ TIMEFORMAT=%3R; time cat "$1" >/dev/null; } 2>&1)"
    best="$(awk -v a="$best" -v b="$t" 'BEGIN { print (a == "" || b + 0 < a + 0) ? b : a }')"
  done
  echo "$best"
}

echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
for size in "${sizes[@]}"; do
  rec="$dir/bench.rec"
  echo
  "$bench" write "$rec" --total "$total" --record-size "$size"
  cat "$rec" >/dev/null
  cat "$rec" >/dev/null
  seconds="$(cat_seconds "$rec")"
  # The prefetcher holds about 4 MiB of records (at least 64): with fewer
  # small records in flight its threads wake each other for every few.
  capacity=$(( 4194304 / $(numfmt --from=iec "$size") ))
  (( capacity >= 64 )) || capacity=64
  "$bench" read "$rec" --repeat "$repeat" --cat-seconds "$seconds" --capacity "$capacity"
  rm -f "$rec" "$dir/bench.idx"
done
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
