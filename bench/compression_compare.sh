#!/usr/bin/env bash
# The wire formats (docs/compression.md) on K emulated hosts (network
# namespaces, tools/netns.sh) with links shaped to RATE: a 64 MiB float32
# allreduce in each format, interleaved over ROUNDS rounds, as effective
# busbw (float32 bytes per second) and its ratio to the uncompressed one in
# the same round; then the same on this machine's shared memory through the
# ring (where compression does not pay).
#   sudo bash bench/compression_compare.sh [K] [RATE]     (default 4 1gbit)
# ROUNDS (3), FORMATS ("native bf16 fp16 fp8_e4m3 fp8_e5m2 int8"), BYTES (64M).
set -euo pipefail
# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
K="${1:-4}"
RATE="${2:-1gbit}"
ROUNDS="${ROUNDS:-3}"
FORMATS="${FORMATS:-native bf16 fp16 fp8_e4m3 fp8_e5m2 int8}"
BYTES="${BYTES:-64M}"
export KOLO_NETNS_PREFIX="${KOLO_NETNS_PREFIX:-kc-}"

why=$(bash tools/netns.sh probe) || { echo "compression_compare: cannot emulate hosts here: $why" >&2; exit 1; }
build_and_copy compression //bench:kolo_bench
trap 'bash tools/netns.sh down; rm -rf "$WORK"' EXIT
bash tools/netns.sh up "$K" "$RATE"

# One 64 MiB row's busbw (GB/s) for format $1, with kolorun's extra arguments after it.
busbw() {
  local wire=$1
  shift
  python3 tools/kolorun "$@" "$WORK/kolo_bench" --wire "$wire" --min-bytes "$BYTES" --max-bytes "$BYTES" \
    --iters 5 --warmup 1 2>&1 | awk '/^\[0\] +[0-9]/ {print $(NF-2); exit}'  # the busbw column
}

report() {  # $1: title; the rest: kolorun's arguments
  local title=$1
  shift
  declare -A runs
  for round in $(seq "$ROUNDS"); do
    for f in $FORMATS; do runs[$f]+=" $(busbw "$f" "$@")"; done
    echo "  round $round done" >&2
  done
  echo "### $title, $BYTES float32 sum, busbw GB/s (median of $ROUNDS), ratio to native"
  echo
  echo "| format | effective busbw | x native |"
  echo "| --- | --- | --- |"
  local native
  native=$(echo "${runs[native]}" | tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  for f in $FORMATS; do
    local m
    m=$(echo "${runs[$f]}" | tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    echo "| $f | $m | $(python3 -c "print('%.2f' % ($m / $native))") |"
  done
  echo
}

report "$K emulated hosts at $RATE (one rank each)" -np "$K" --netns "${KOLO_NETNS_PREFIX}:$K"
KOLO_ALGORITHM=ring report "this machine, $K ranks over shared memory through the ring" -np "$K"
