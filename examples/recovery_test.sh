#!/usr/bin/env bash
# Runs the recovery example on 3 ranks: the last dies, the other two must
# re-form a world of 2 and finish every step with correct results.
set -uo pipefail
KOLORUN="$TEST_SRCDIR/$TEST_WORKSPACE/tools/kolorun"
PROG="$TEST_SRCDIR/$TEST_WORKSPACE/examples/recovery"
OUT="${TEST_TMPDIR:-/tmp}/recovery_out"
# The survivors re-form at the next port up: two free ports in a row, below
# the kernel's ephemeral range, where another test's connection could take
# the second one meanwhile (it did once: "Address already in use").
PORT=$(python3 -c '
import random, socket
for _ in range(500):
    p = random.randint(20000, 32000)
    try:
        for q in (p, p + 1):
            s = socket.socket()
            s.bind(("127.0.0.1", q))
            s.close()
    except OSError:
        continue
    print(p)
    break
')
[ -n "$PORT" ] || { echo "FAIL: no two free ports in a row"; exit 1; }
KOLO_TIMEOUT_S=30 timeout 120 "$KOLORUN" -np 3 --master-port "$PORT" "$PROG" >"$OUT" 2>&1
rc=$?
cat "$OUT"
[ "$rc" = 0 ] || { echo "FAIL: the job exited $rc"; exit 1; }
for r in 0 1; do
  grep -q "^\[$r\] rank $r: re-formed a world of 2" "$OUT" || { echo "FAIL: rank $r did not re-form"; exit 1; }
  grep -q "^\[$r\] rank $r: all 10 steps done, the last ones on 2 ranks" "$OUT" || { echo "FAIL: rank $r did not finish"; exit 1; }
done
echo "recovery_test: passed"
