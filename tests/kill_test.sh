#!/usr/bin/env bash
# kill -9 one of 4 ranks in the middle of long allreduces: the other three
# must return an error within a few seconds (the deadline is 60 s), name the
# dead rank, and exit cleanly (no crash, no hang).
set -uo pipefail
WORKER="$TEST_SRCDIR/$TEST_WORKSPACE/tests/mp_worker"
OUT="${TEST_TMPDIR:-/tmp}/kill_out"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

run_case() {
  local victim=$1 pids=() r
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  for r in 0 1 2 3; do
    env KOLO_RANK=$r KOLO_WORLD_SIZE=4 KOLO_MASTER_ADDR=127.0.0.1 KOLO_MASTER_PORT=$PORT KOLO_TIMEOUT_S=60 \
      "$WORKER" long >"$OUT.$r" 2>&1 &
    pids+=($!)
  done
  # Wait until every rank is in its loop, then let the collectives run a bit.
  for _ in $(seq 1 200); do
    [ "$(cat "$OUT".[0-3] 2>/dev/null | grep -c looping)" = 4 ] && break
    sleep 0.05
  done
  sleep 1
  kill -9 "${pids[$victim]}"
  local killed_at=$(date +%s.%N)
  for r in 0 1 2 3; do
    [ "$r" = "$victim" ] && continue
    wait "${pids[$r]}"
    local rc=$? took
    took=$(python3 -c "import time; print(round(time.time() - $killed_at, 2))")
    echo "victim $victim: rank $r exited $rc after ${took}s: $(grep 'failed' "$OUT.$r" | head -1 | cut -c1-300)"
    case $rc in
      13|14) ;;  # KOLO_ERR_TIMEOUT or KOLO_ERR_PEER_LOST, reported by the worker as 10 + code
      *) fail "victim $victim: rank $r exited $rc, expected a timeout or peer-lost error"; cat "$OUT.$r" ;;
    esac
    python3 -c "import sys; sys.exit(0 if $took < 10 else 1)" || fail "victim $victim: rank $r took ${took}s"
    grep -q "rank $victim" "$OUT.$r" || fail "victim $victim: rank $r's error does not name rank $victim"
    grep -q "async error: " "$OUT.$r" || fail "victim $victim: rank $r did not report its async error"
  done
  wait "${pids[$victim]}" 2>/dev/null
}

run_case 2   # a rank that is not serving the store
run_case 0   # the rank that serves the store

if [ "$failures" = 0 ]; then echo "kill_test: all cases passed"; exit 0; fi
echo "kill_test: $failures failure(s)"; exit 1
