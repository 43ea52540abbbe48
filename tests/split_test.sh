#!/usr/bin/env bash
# Split communicators across processes: kolorun jobs of 3 and 4 ranks split
# by parity (tests/split_worker.c), a split whose engine starts after world
# rank 0 has finished, and a kill -9 of a rank in one split
# while both splits are busy: its split fails within seconds, the other
# split goes on.
set -uo pipefail
# shellcheck source=tests/lib/common.sh
. "$TEST_SRCDIR/$TEST_WORKSPACE/tests/lib/common.sh"
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
WORKER="$ROOT/tests/split_worker"
OUT="${TEST_TMPDIR:-/tmp}/split_out"

for n in 3 4; do
  kolorun_job "$n" 120 "$WORKER" check
done

# World rank 0 finishes first; the odd split starts its engine later,
# through the store rank 0's process serves: that process must outlive it.
kolorun_job 4 120 "$WORKER" late

# Rank 3 (the odd split with rank 1) dies; ranks 0 and 2 (the even split)
# keep going for their SPLIT_RUN_S and exit 0.
start_long_ranks 4 "$OUT" KOLO_MASTER_ADDR=127.0.0.1 KOLO_MASTER_PORT="$(free_port)" KOLO_TIMEOUT_S=60 \
  SPLIT_RUN_S=6
kill -9 "${pids[3]}"
killed_at=$(date +%s.%N)
await_error "rank 1 (the dead rank's split)" "${pids[1]}" "$OUT.1" "$killed_at" 10
for r in 0 2; do
  wait "${pids[$r]}"
  rc=$?
  if [ "$rc" -ne 0 ] || ! grep -q "rank $r survived" "$OUT.$r"; then
    fail "rank $r (the other split) exited $rc"
    cat "$OUT.$r"
  else
    echo "-- rank $r (the other split) went on and exited cleanly"
  fi
done
wait "${pids[3]}" 2>/dev/null

finish split_test
