#!/usr/bin/env bash
# kolo_recv_any and kolo_recv_any_async across processes, through the C
# API (tests/recv_any_worker.c), over shared memory and over TCP: kolorun
# jobs of 3 and 4 ranks in which every rank sends to one (payloads per
# sender, each sender once, two messages of a pair in order, the
# asynchronous form, refused in a group), a count that disagrees, and a
# receive that no rank sends to (KOLO_TIMEOUT_S=2).
set -uo pipefail
# shellcheck source=tests/lib/common.sh
. "$TEST_SRCDIR/$TEST_WORKSPACE/tests/lib/common.sh"
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
WORKER="$ROOT/tests/recv_any_worker"

for transport in shm tcp; do
  export KOLO_TRANSPORT=$transport
  echo "== KOLO_TRANSPORT=$transport"
  for n in 3 4; do
    # Small segments: each message is several on the wire.
    echo "check:"
    KOLO_SEGMENT_BYTES=4096 kolorun_job "$n" 120 "$WORKER" check
    echo "mismatch:"
    kolorun_job "$n" 120 "$WORKER" mismatch
  done
  echo "timeout:"
  KOLO_TIMEOUT_S=2 kolorun_job 3 60 "$WORKER" timeout
done

finish recv_any_test
