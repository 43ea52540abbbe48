#!/usr/bin/env bash
# kolo against its peers and the physical limit, all in one run on this
# machine (shared machines are noisy: compare ratios within one run).
#   1. the loopback ceiling: what two concurrent plain TCP streams move;
#   2. kolo_bench allreduce for each N over TCP (KOLO_TRANSPORT=tcp: one
#      machine's ranks would share memory otherwise), with %ideal against
#      that ceiling, then as it runs by default (shared memory);
#   3. Gloo's four allreduce algorithms and Open MPI, same sizes, same stats.
# Usage: bash bench/compare.sh [N ...]   (default 2 4); MAX_BYTES etc. as in
# bench/peers/run_peers.sh.
set -euo pipefail
# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
NS=("$@")
[[ ${#NS[@]} -eq 0 ]] && NS=(2 4)
MAX_BYTES="${MAX_BYTES:-268435456}"

build_and_copy compare //bench:kolo_bench //bench/peers:tcp_ceiling

echo "== loopback ceiling"
"$WORK/tcp_ceiling" | tee "$WORK/ceiling.txt"
CEILING=$(awk '/tcp_two_streams_GBps/ {print $2}' "$WORK/ceiling.txt")

for n in "${NS[@]}"; do
  echo "== kolo allreduce, N=$n, over TCP"
  KOLO_TRANSPORT=tcp tools/kolorun -np "$n" --no-prefix "$WORK/kolo_bench" --max-bytes "$MAX_BYTES" \
    --link-gbps "$CEILING"
  echo "== kolo allreduce, N=$n, as it runs by default"
  tools/kolorun -np "$n" --no-prefix "$WORK/kolo_bench" --max-bytes "$MAX_BYTES"
done

echo "== peers"
SKIP_CEILING=1 MAX_BYTES="$MAX_BYTES" bash bench/peers/run_peers.sh "${NS[@]}"
