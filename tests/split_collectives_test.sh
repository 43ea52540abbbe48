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
  out=$(python3 "$ROOT/tools/kolorun" -np "$n" --timeout 240 "$WORKER" 2>&1)
  rc=$?
  oks=$(echo "$out" | grep -cE "rank [0-9]+ ok$")
  if [ "$rc" -ne 0 ] || [ "$oks" -ne "$n" ]; then
    fail "$n ranks: exit $rc, $oks of $n ranks ok"
    echo "$out" | tail -30
  else
    echo "-- $n ranks: every rank ok"
  fi
done

finish split_collectives_test
