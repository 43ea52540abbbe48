#!/usr/bin/env bash
# Shared memory inside a container's /dev/shm: a mount namespace of its own
# with /dev/shm a 64 MiB tmpfs (Docker's and Kubernetes' default), made here
# as a container would have it.
#  1. 16 ranks of one machine stay on shared memory, their rings and arena
#     shrunk to fit (said in one line at info level), every allreduce exact
#     (kolo_bench's check, 1 MiB and 16 MiB).
#  2. A /dev/shm too small for even the smallest rings (1 MiB): the ranks
#     fall back to TCP, with the warning that says how big it must be.
# Busbw reported, not asserted (docs/performance.md has the figures).
# Needs root for the mount namespace; skips, saying why, where it cannot.
set -uo pipefail
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
# shellcheck source=tests/lib/common.sh
. "$ROOT/tests/lib/common.sh"
KOLORUN="$ROOT/tools/kolorun"
BENCH="$ROOT/bench/kolo_bench"
OUT="${TEST_TMPDIR:-/tmp}/shm_container_out"

unshare -m --propagation private true 2>/dev/null || skip "no mount namespace (needs root)"

# in_container SIZE COMMAND...: COMMAND with /dev/shm a tmpfs of SIZE.
in_container() {
  local size=$1
  shift
  unshare -m --propagation private sh -c 'mount -t tmpfs -o size="$0" tmpfs /dev/shm && exec "$@"' "$size" "$@"
}

# 1. 16 ranks in 64 MiB.
KOLO_LOG_LEVEL=info in_container 64m timeout 240 "$KOLORUN" -np 16 "$BENCH" --min-bytes 1M --max-bytes 16M \
  --step-factor 16 --iters 3 --warmup 1 >"$OUT" 2>&1
rc=$?
[ "$rc" = 0 ] || { fail "16 ranks in a 64 MiB /dev/shm: exit $rc"; tail -20 "$OUT"; }
grep -q "16 ranks over shm" "$OUT" || { fail "16 ranks in 64 MiB did not run over shared memory"; grep -m3 "WARN\|over" "$OUT"; }
grep -q "shared memory sized to /dev/shm: rings of .* for 16 ranks" "$OUT" ||
  fail "no line says how the rings and arena were sized"
[ "$(grep -c '^\[0\] .* OK ' "$OUT")" = 2 ] || fail "not every size checked OK"
grep -q "FAIL\|MISMATCH" "$OUT" && fail "a check failed: $(grep -m1 'FAIL\|MISMATCH' "$OUT")"
echo "16 ranks in 64 MiB: $(awk '/^\[0\] +[0-9]+ / {printf "%s B %s GB/s  ", $2, $7}' "$OUT")"

# 2. Too small even for the smallest rings: TCP, said.
in_container 1m timeout 240 "$KOLORUN" -np 4 "$BENCH" --min-bytes 64K --max-bytes 64K --iters 3 --warmup 1 \
  >"$OUT.small" 2>&1 || { fail "4 ranks in a 1 MiB /dev/shm: exit $?"; tail -20 "$OUT.small"; }
grep -q "4 ranks over tcp" "$OUT.small" || fail "4 ranks in 1 MiB did not fall back to TCP"
grep -q "/dev/shm has 1 MiB free and 4 ranks here need .* even with the smallest rings" "$OUT.small" ||
  { fail "the fallback's warning does not say what /dev/shm needs"; grep -m2 WARN "$OUT.small"; }

finish shm_container_test
