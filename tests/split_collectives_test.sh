#!/usr/bin/env bash
# Every collective and point-to-point call, blocking and _async, for every
# dtype (and op) on split communicators across processes: kolorun jobs of
# 3 and 5 ranks split by parity, keys reversed (tests/split_collectives_worker.c).
set -uo pipefail
# shellcheck source=tests/lib/common.sh
. "$TEST_SRCDIR/$TEST_WORKSPACE/tests/lib/common.sh"
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
WORKER="$ROOT/tests/split_collectives_worker"

for n in 3 5; do
  kolorun_job "$n" 240 "$WORKER"
done

finish split_collectives_test
