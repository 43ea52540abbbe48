#!/usr/bin/env bash
# Runs the peer benchmarks (Gloo's four allreduce algorithms, Open MPI's
# MPI_Allreduce, and the loopback TCP ceiling) with the same sizes and the same
# statistics as kolo's own benchmark, and prints one labelled table per run.
#
# Usage (from anywhere; paths are resolved from this file):
#   bash bench/peers/run_peers.sh [N ...]          # default ranks: 2 4
# Environment overrides:
#   MIN_BYTES (4096)  MAX_BYTES (268435456)  STEP_FACTOR (4)
#   ITERS (20)  WARMUP (3)  ALGOS ("ring ring_chunked halving_doubling allreduce")
#   SKIP_CEILING=1  to leave out the TCP ceiling (it moves 6 GiB, ~2 s)
#   RUN_TIMEOUT (900) seconds before a stuck run is killed
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"

NS=("$@")
[[ ${#NS[@]} -eq 0 ]] && NS=(2 4)
MIN_BYTES="${MIN_BYTES:-4096}"
MAX_BYTES="${MAX_BYTES:-268435456}"
STEP_FACTOR="${STEP_FACTOR:-4}"
ITERS="${ITERS:-20}"
WARMUP="${WARMUP:-3}"
ALGOS="${ALGOS:-ring ring_chunked halving_doubling allreduce}"
RUN_TIMEOUT="${RUN_TIMEOUT:-900}"
SWEEP=(--min-bytes "$MIN_BYTES" --max-bytes "$MAX_BYTES"
       --step-factor "$STEP_FACTOR" --iters "$ITERS" --warmup "$WARMUP")

WORK="$(mktemp -d "${TMPDIR:-/tmp}/kolo-peers.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

die() { echo "run_peers: $*" >&2; exit 1; }

# --- build -----------------------------------------------------------------
# The binaries are copied out of bazel-bin at once: the workspace is shared,
# and a later build with another configuration would repoint bazel-bin while
# the (long) sweeps below are still running.
echo "== building"
bazel build //bench/peers:gloo_bench //bench/peers:tcp_ceiling
BIN="$(bazel info bazel-bin 2>/dev/null)/bench/peers"
cp "$BIN/gloo_bench" "$BIN/tcp_ceiling" "$WORK/"
mpicc -O2 -o "$WORK/mpi_bench" bench/peers/mpi_bench.c

# --- gloo --------------------------------------------------------------------
# Each algorithm gets fresh processes and a fresh rendezvous directory: the
# Debian Gloo snapshot degrades when algorithms share a context, and a stale
# store would pair ranks from different runs.
run_gloo() {
  local n="$1" algo="$2"
  local store="$WORK/store-$algo-$n" logs="$WORK/logs-$algo-$n"
  mkdir -p "$store" "$logs"
  local pids=() r
  for ((r = 0; r < n; r++)); do
    KOLO_RANK="$r" KOLO_WORLD_SIZE="$n" timeout "$RUN_TIMEOUT" \
      "$WORK/gloo_bench" --store-dir "$store" --algo "$algo" "${SWEEP[@]}" \
      >"$logs/$r.out" 2>"$logs/$r.err" &
    pids+=("$!")
  done
  # Wait for every rank (not just the first failure) so no process is left
  # behind, then report each one that failed with what it said.
  local failed=0
  for ((r = 0; r < n; r++)); do
    if ! wait "${pids[$r]}"; then
      failed=1
      echo "run_peers: gloo $algo N=$n rank $r FAILED; its stderr:" >&2
      cat "$logs/$r.err" >&2
    fi
  done
  echo
  echo "== gloo algo=$algo N=$n"
  cat "$logs/0.out"
  [[ $failed -eq 0 ]] || die "gloo $algo N=$n failed (a FAIL row or a crash)"
}

# --- mpi -------------------------------------------------------------------
# Over TCP only (pml ob1 + btl tcp,self), so MPI crosses the same loopback
# TCP that Gloo and kolo's TCP transport use; and over its shared memory
# (btl vader,self: Open MPI's default on one machine), the peer of kolo's.
run_mpi() {
  local n="$1" btl="$2"
  echo
  echo "== MPI_Allreduce (Open MPI, pml ob1, btl $btl) N=$n"
  timeout "$RUN_TIMEOUT" mpirun --allow-run-as-root --oversubscribe -np "$n" \
    --mca pml ob1 --mca btl "$btl" "$WORK/mpi_bench" "${SWEEP[@]}" \
    || die "MPI ($btl) N=$n failed (a FAIL row or a crash)"
}

for n in "${NS[@]}"; do
  for algo in $ALGOS; do run_gloo "$n" "$algo"; done
  run_mpi "$n" tcp,self
  run_mpi "$n" vader,self
done

if [[ "${SKIP_CEILING:-0}" != 1 ]]; then
  echo
  echo "== loopback TCP ceiling"
  "$WORK/tcp_ceiling" || die "tcp_ceiling failed"
fi
