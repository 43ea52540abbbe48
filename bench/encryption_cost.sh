#!/usr/bin/env bash
# What KOLO_ENCRYPT=1 costs: allreduce busbw with and without it, over TCP,
# at 1 MiB and 64 MiB, interleaved over ROUNDS rounds (median, and the
# encrypted one's ratio to the plain one of the same layout):
#   - this machine's loopback, N=2 and N=4 (KOLO_TRANSPORT=tcp);
#   - K emulated hosts (network namespaces, tools/netns.sh; root) with their
#     links shaped to each RATE, one rank each, K=2 and 4.
#   sudo bash bench/encryption_cost.sh ["1gbit 10gbit"]
# ROUNDS (3). Debian's Gloo has no TLS transport to compare with.
set -euo pipefail
# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
RATES="${1:-1gbit 10gbit}"
ROUNDS="${ROUNDS:-3}"
export KOLO_NETNS_PREFIX="${KOLO_NETNS_PREFIX:-ke-}"
build_and_copy encryption //bench:kolo_bench
trap 'bash tools/netns.sh down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

# "busbw(1 MiB) busbw(64 MiB)" in GB/s for KOLO_ENCRYPT=$1, kolorun's arguments after it.
busbw() {
  local encrypt=$1
  shift
  KOLO_ENCRYPT=$encrypt python3 tools/kolorun "$@" "$WORK/kolo_bench" --min-bytes 1M --max-bytes 64M \
    --step-factor 64 --iters 5 --warmup 2 2>&1 |
    awk '/^\[0\] +[0-9]/ {row = row " " $(NF-2)} END {print row}'
}

median() { tr ' ' '\n' | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# One table row per size for a layout: $1 its title; the rest kolorun's arguments.
measure() {
  local title=$1 round plain=() sealed=() p s
  shift
  for round in $(seq "$ROUNDS"); do
    plain+=("$(busbw 0 "$@")")
    sealed+=("$(busbw 1 "$@")")
  done
  for column in 1 2; do
    p=$(for r in "${plain[@]}"; do echo "$r" | awk -v c=$column '{print $c}'; done | median)
    s=$(for r in "${sealed[@]}"; do echo "$r" | awk -v c=$column '{print $c}'; done | median)
    echo "| $title | $([ $column = 1 ] && echo 1 MiB || echo 64 MiB) | $p | $s | $(python3 -c "print('%.2f' % ($s / $p))") |"
  done
}

echo "| layout | size | busbw plain (GB/s) | busbw encrypted (GB/s) | encrypted / plain |"
echo "| --- | --- | --- | --- | --- |"
for n in 2 4; do KOLO_TRANSPORT=tcp measure "loopback, N=$n" -np "$n"; done
why=$(bash tools/netns.sh probe) || { echo "(no emulated hosts here: $why)"; exit 0; }
for rate in $RATES; do
  for k in 2 4; do
    bash tools/netns.sh up "$k" "$rate" >/dev/null
    measure "$k hosts at $rate" -np "$k" --netns "${KOLO_NETNS_PREFIX}:$k"
    bash tools/netns.sh down >/dev/null
  done
done
