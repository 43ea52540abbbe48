#!/usr/bin/env bash
# kill -9 one of 4 ranks in the middle of long allreduces: the other three
# must return an error within a few seconds (the deadline is 60 s), name the
# dead rank, and exit cleanly (no crash, no hang).
set -uo pipefail
# shellcheck source=tests/lib/common.sh
. "$TEST_SRCDIR/$TEST_WORKSPACE/tests/lib/common.sh"
WORKER="$TEST_SRCDIR/$TEST_WORKSPACE/tests/mp_worker"
OUT="${TEST_TMPDIR:-/tmp}/kill_out"

run_case() {
  local victim=$1 r
  start_long_ranks 4 "$OUT" KOLO_MASTER_ADDR=127.0.0.1 KOLO_MASTER_PORT="$(free_port)" KOLO_TIMEOUT_S=60
  kill -9 "${pids[$victim]}"
  local killed_at=$(date +%s.%N)
  for r in 0 1 2 3; do
    [ "$r" = "$victim" ] && continue
    await_error "victim $victim: rank $r" "${pids[$r]}" "$OUT.$r" "$killed_at" 10
    grep -q "rank $victim" "$OUT.$r" || fail "victim $victim: rank $r's error does not name rank $victim"
    grep -q "async error: " "$OUT.$r" || fail "victim $victim: rank $r did not report its async error"
  done
  wait "${pids[$victim]}" 2>/dev/null
}

run_case 2   # a rank that is not serving the store
run_case 0   # the rank that serves the store

finish kill_test
