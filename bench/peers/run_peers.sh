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
#   PEER_BINDING (both): where kolorun binds N ranks to cores (kolorun
#     --bind-to auto), each peer runs twice, as its own launcher places it
#     and bound as kolorun binds kolo's ranks (bind_like_kolorun.sh; its
#     tables' titles say "bound like kolorun"): either may be the faster
#     (Gloo's rings, whose ranks busy-poll, run slower when two share a
#     core; Open MPI's tcp runs faster). own: only the first; kolorun: only
#     the second
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

# --- placement ---------------------------------------------------------------
# "own" (as the peer's launcher places its ranks) and "bound" (as kolorun
# binds kolo's): which of them run N ranks (PEER_BINDING), what starts a rank
# under one, and what its table's title says of it.
placements() {
  case "${PEER_BINDING:-both}" in
    own) echo own ;;
    kolorun) echo bound ;;
    both) if bench/peers/bind_like_kolorun.sh --binds "$1"; then echo own bound; else echo own; fi ;;
    *) die "PEER_BINDING must be both, own or kolorun, not '$PEER_BINDING'" ;;
  esac
}
wrapper() { [[ $1 == bound ]] && echo bench/peers/bind_like_kolorun.sh || true; }
title() { [[ $1 == bound ]] && echo " (bound like kolorun)" || true; }

# --- gloo --------------------------------------------------------------------
# Each algorithm gets fresh processes and a fresh rendezvous directory: the
# Debian Gloo snapshot degrades when algorithms share a context, and a stale
# store would pair ranks from different runs.
run_gloo() {
  local n="$1" algo="$2" placement="$3"
  local store="$WORK/store-$algo-$n-$placement" logs="$WORK/logs-$algo-$n-$placement"
  mkdir -p "$store" "$logs"
  local pids=() r
  for ((r = 0; r < n; r++)); do
    KOLO_RANK="$r" KOLO_WORLD_SIZE="$n" timeout "$RUN_TIMEOUT" $(wrapper "$placement") \
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
  echo "== gloo algo=$algo N=$n$(title "$placement")"
  cat "$logs/0.out"
  [[ $failed -eq 0 ]] || die "gloo $algo N=$n failed (a FAIL row or a crash)"
}

# --- mpi -------------------------------------------------------------------
# Over TCP only (pml ob1 + btl tcp,self), so MPI crosses the same loopback
# TCP that Gloo and kolo's TCP transport use; and over its shared memory
# (btl vader,self: Open MPI's default on one machine), the peer of kolo's.
run_mpi() {
  local n="$1" btl="$2" placement="$3"
  echo
  echo "== MPI_Allreduce (Open MPI, pml ob1, btl $btl$(title "$placement")) N=$n"
  timeout "$RUN_TIMEOUT" mpirun --allow-run-as-root --oversubscribe -np "$n" \
    --mca pml ob1 --mca btl "$btl" $(wrapper "$placement") "$WORK/mpi_bench" "${SWEEP[@]}" \
    || die "MPI ($btl) N=$n failed (a FAIL row or a crash)"
}

for n in "${NS[@]}"; do
  for placement in $(placements "$n"); do
    for algo in $ALGOS; do run_gloo "$n" "$algo" "$placement"; done
    run_mpi "$n" tcp,self "$placement"
    run_mpi "$n" vader,self "$placement"
  done
done

if [[ "${SKIP_CEILING:-0}" != 1 ]]; then
  echo
  echo "== loopback TCP ceiling"
  "$WORK/tcp_ceiling" || die "tcp_ceiling failed"
fi
