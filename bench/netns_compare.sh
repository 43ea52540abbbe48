#!/usr/bin/env bash
# kolo on an emulated cluster: K hosts (network namespaces, tools/netns.sh)
# with links shaped to RATE, against the link rate, a plain TCP stream over
# the same shaped link, the ring's own bound (K streams at once, each host
# to the next, as a ring's: where the hosts share a few cores, the stack's
# cost per byte, not the link, sets it) and Gloo's allreduce algorithms, all
# in one run; then the training-scaling emulation on the same hosts.
#   sudo bash bench/netns_compare.sh [K] [RATE] [COMPUTE_SCALE]   (default 4 1gbit 25)
# COMPUTE_SCALE keeps the compute-to-bandwidth ratio of a real cluster:
# Horovod's published runs used Pascal GPUs on 25 Gbit/s links, so on
# 1 Gbit/s links the compute is 25x slower. SKIP_GLOO=1, SKIP_SCALING=1
# leave those parts out; MIN_BYTES/MAX_BYTES bound the sweep. BASELINE:
# another kolo_bench (e.g. built from an earlier commit), swept right after
# kolo on the same hosts, for a before/after ratio.
set -euo pipefail
# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
K="${1:-4}"
RATE="${2:-1gbit}"
SCALE="${3:-25}"
MIN_BYTES="${MIN_BYTES:-1M}"
MAX_BYTES="${MAX_BYTES:-64M}"
export KOLO_NETNS_PREFIX="${KOLO_NETNS_PREFIX:-kb-}"

why=$(bash tools/netns.sh probe) || { echo "netns_compare: cannot emulate hosts here: $why" >&2; exit 1; }
build_and_copy netns //bench:kolo_bench //bench/peers:gloo_bench //bench/peers:tcp_ceiling
trap 'bash tools/netns.sh down; rm -rf "$WORK"' EXIT
bash tools/netns.sh up "$K" "$RATE"
RATE_GBPS=$(python3 -c "
r='$RATE'.lower(); m={'kbit':1e3,'mbit':1e6,'gbit':1e9}
print(next(float(r[:-len(k)]) * v / 8e9 for k, v in m.items() if r.endswith(k)))")

# A plain TCP stream from host 0 to host 1 over the shaped links.
stream() {
  ip netns exec "${KOLO_NETNS_PREFIX}h1" python3 - <<'PY' &
import socket, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.77.0.2", 5999)); s.listen(1); c, _ = s.accept()
got, t0 = 0, None
while True:
    b = c.recv(1 << 20)
    if not b: break
    if t0 is None: t0 = time.monotonic()
    got += len(b)
print("%.6f" % (got / (time.monotonic() - t0) / 1e9))
PY
  local rx=$!
  sleep 0.5
  ip netns exec "${KOLO_NETNS_PREFIX}h0" python3 -c "
import socket
s = socket.create_connection(('10.77.0.2', 5999)); buf = b'x' * (1 << 20)
for _ in range(192): s.sendall(buf)
s.close()"
  wait $rx
}
STREAM_GBPS=$(stream)
echo "== $K hosts, links shaped to $RATE = $RATE_GBPS GB/s; a plain TCP stream moves $STREAM_GBPS GB/s ($(python3 -c "print(round(100 * $STREAM_GBPS / $RATE_GBPS, 1))")% of the rate)"

# K streams at once, host i to host i+1 (bench/peers/tcp_ceiling, buffers
# that stay in the cache: the stack and the links alone), each moving about
# two seconds of the link's rate. A ring allreduce's busbw is what each of
# its links carries, so its bound is the aggregate over K. Each end has 60 s
# (a receiver whose sender never came would wait on accept for ever).
ring_streams() {
  local bytes i
  bytes=$(python3 -c "print(max(64 << 20, int($RATE_GBPS * 2e9)))")
  for ((i = 0; i < K; i++)); do
    ip netns exec "${KOLO_NETNS_PREFIX}h$i" timeout 60 "$WORK/tcp_ceiling" --receive 6000 \
      --bytes-per-stream "$bytes" >"$WORK/ring-stream-$i" &
  done
  sleep 0.5
  for ((i = 0; i < K; i++)); do
    ip netns exec "${KOLO_NETNS_PREFIX}h$i" timeout 60 "$WORK/tcp_ceiling" \
      --send "10.77.0.$(((i + 1) % K + 1)):6000" --bytes-per-stream "$bytes" &
  done
  wait
  cat "$WORK"/ring-stream-* | awk -v k="$K" '
    $1 == "received" {n++; b += $2; if (lo == "" || $3 < lo) lo = $3; if ($4 > hi) hi = $4}
    END {if (n == k && hi > lo) printf "%.6f\n", b / (hi - lo) / 1e9 / n; else print "nan"}'
}
RING_GBPS=$(ring_streams)
echo "== the ring's bound: $K streams at once, each host to the next, move $RING_GBPS GB/s each" \
  "($(python3 -c "print(round(100 * $RING_GBPS / $RATE_GBPS, 1))")% of the rate)"

sweep() {  # NAME BINARY: busbw per size, as a fraction of the rate, the stream and the ring's bound
  echo "== $1 allreduce, $K ranks on $K hosts (busbw; the ideal ring reaches the link rate)"
  printf "%12s %12s %12s %12s %12s\n" "size(B)" "busbw(GB/s)" "of rate" "of stream" "of ring"
  tools/kolorun -np "$K" --no-prefix --netns "${KOLO_NETNS_PREFIX}:$K" "$2" --min-bytes "$MIN_BYTES" \
    --max-bytes "$MAX_BYTES" --iters 10 --warmup 2 --json "$WORK/$1.json" >/dev/null
  python3 - "$WORK/$1.json" "$RATE_GBPS" "$STREAM_GBPS" "$RING_GBPS" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); rate, stream, ring = map(float, sys.argv[2:5])
for r in d["rows"]:
    b = r["busbw_gbps"]
    print("%12d %12.4f %11.1f%% %11.1f%% %11.1f%%" % (r["bytes"], b, 100 * b / rate, 100 * b / stream, 100 * b / ring))
PY
}
sweep kolo "$WORK/kolo_bench"
if [[ -n "${BASELINE:-}" ]]; then
  cp "$BASELINE" "$WORK/kolo_baseline"
  sweep kolo_baseline "$WORK/kolo_baseline"
fi

if [[ "${SKIP_GLOO:-0}" != 1 ]]; then
  to_bytes() { python3 -c "s='$1'; m={'K':1<<10,'M':1<<20,'G':1<<30}; print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(s))"; }
  for algo in ring ring_chunked halving_doubling allreduce; do
    echo "== gloo $algo, $K ranks on $K hosts"
    store="$WORK/store-$algo"
    mkdir -p "$store"
    pids=()
    for ((r = 0; r < K; r++)); do
      KOLO_RANK=$r KOLO_WORLD_SIZE=$K ip netns exec "${KOLO_NETNS_PREFIX}h$r" "$WORK/gloo_bench" --store-dir "$store" \
        --hostname "10.77.0.$((r + 1))" --algo "$algo" --min-bytes "$(to_bytes "$MIN_BYTES")" \
        --max-bytes "$(to_bytes "$MAX_BYTES")" --iters 10 --warmup 2 >"$WORK/gloo-$algo-$r.out" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || echo "gloo $algo: a rank failed"; done
    awk -v rate="$RATE_GBPS" -v stream="$STREAM_GBPS" -v ring="$RING_GBPS" '/^ +[0-9]/ {
      printf "%12d %12.4f %11.1f%% %11.1f%% %11.1f%%\n", $1, $5, 100*$5/rate, 100*$5/stream, 100*$5/ring}' \
      "$WORK/gloo-$algo-0.out"
  done
fi

if [[ "${SKIP_SCALING:-0}" != 1 ]]; then
  echo "== training scaling, $K ranks on $K hosts, compute x$SCALE (the compute-to-bandwidth ratio of P100s on 25 Gbit/s when RATE is 1gbit)"
  tools/kolorun -np "$K" --no-prefix --netns "${KOLO_NETNS_PREFIX}:$K" "$WORK/kolo_bench" scaling --model all \
    --compute-scale "$SCALE" --steps "${STEPS:-2}" --predict-ranks 512 --progress
fi
