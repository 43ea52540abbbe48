#!/usr/bin/env bash
# The hierarchical allreduce against the flat ring on an emulated cluster:
# H hosts (network namespaces, tools/netns.sh) of L ranks each, links shaped
# to RATE; ranks of one host share memory. Interleaved rounds in one run,
# the same binary, KOLO_ALGORITHM=ring against the automatic choice
# (hierarchical above KOLO_SMALL_ALLREDUCE_BYTES).
#   sudo bash bench/hierarchy_compare.sh [H] [L] [RATE] [ROUNDS]   (default 2 2 1gbit 3)
# SIZES (default "1M 16M 64M") are the buffers compared; COLLECTIVE
# (default allreduce; allgather and reduce_scatter have hierarchical
# schedules too) the collective.
set -euo pipefail
# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
H="${1:-2}"
L="${2:-2}"
RATE="${3:-1gbit}"
ROUNDS="${4:-3}"
SIZES="${SIZES:-1M 16M 64M}"
COLLECTIVE="${COLLECTIVE:-allreduce}"
N=$((H * L))
export KOLO_NETNS_PREFIX="${KOLO_NETNS_PREFIX:-kh-}"

why=$(bash tools/netns.sh probe) || { echo "hierarchy_compare: cannot emulate hosts here: $why" >&2; exit 1; }
build_and_copy hierarchy //bench:kolo_bench
trap 'bash tools/netns.sh down; rm -rf "$WORK"' EXIT
bash tools/netns.sh up "$H" "$RATE"

# time in us of one size under one algorithm setting, and the schedule the bench reports
run() {
  local algo=$1 size=$2
  KOLO_ALGORITHM=$algo tools/kolorun -np "$N" --no-prefix --netns "${KOLO_NETNS_PREFIX}:$H" "$WORK/kolo_bench" \
    --collective "$COLLECTIVE" --min-bytes "$size" --max-bytes "$size" --iters 5 --warmup 1 --json "$WORK/$algo.json" >/dev/null
  python3 -c "
import json; r = json.load(open('$WORK/$algo.json'))['rows'][0]
print('%.1f %s %s' % (r['time_us'], r.get('algorithm', 'n/a'), json.load(open('$WORK/$algo.json'))['transport']))"
}

echo "== $H hosts x $L ranks, links shaped to $RATE; float32 sum $COLLECTIVE; $ROUNDS interleaved rounds"
printf "%10s %6s %14s %14s %10s  %s\n" "size" "round" "ring(ms)" "auto(ms)" "auto/ring" "auto's schedule, transports"
for size in $SIZES; do
  for ((round = 1; round <= ROUNDS; round++)); do
    read -r ring_us ring_algo _ < <(run ring "$size")
    read -r auto_us auto_algo transports < <(run auto "$size")
    printf "%10s %6d %14.1f %14.1f %10.3f  %s, %s (ring: %s)\n" "$size" "$round" "$(echo "$ring_us / 1000" | bc -l)" \
      "$(echo "$auto_us / 1000" | bc -l)" "$(echo "$auto_us / $ring_us" | bc -l)" "$auto_algo" "$transports" "$ring_algo"
  done
done
