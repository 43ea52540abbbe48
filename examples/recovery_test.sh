#!/usr/bin/env bash
# Runs the recovery example on 3 ranks: the last dies, the other two must
# shrink to a world of 2 and finish every step with correct results.
set -uo pipefail
KOLORUN="$TEST_SRCDIR/$TEST_WORKSPACE/tools/kolorun"
PROG="$TEST_SRCDIR/$TEST_WORKSPACE/examples/recovery"
OUT="${TEST_TMPDIR:-/tmp}/recovery_out"
KOLO_TIMEOUT_S=30 timeout 120 "$KOLORUN" -np 3 "$PROG" >"$OUT" 2>&1
rc=$?
cat "$OUT"
[ "$rc" = 0 ] || { echo "FAIL: the job exited $rc"; exit 1; }
for r in 0 1; do
  grep -q "^\[$r\] rank $r: shrank to a world of 2" "$OUT" || { echo "FAIL: rank $r did not shrink"; exit 1; }
  grep -q "^\[$r\] rank $r: all 10 steps done, the last ones on 2 ranks" "$OUT" || { echo "FAIL: rank $r did not finish"; exit 1; }
done
echo "recovery_test: passed"
