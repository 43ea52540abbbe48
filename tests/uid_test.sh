#!/usr/bin/env bash
# kolo_get_unique_id / kolo_comm_init_rank across processes
# (tests/uid_worker.c): rank 0 writes the id to a file, the others read it.
# 4 ranks run an allreduce; a wrong secret fails with AUTH or TIMEOUT, not a
# hang; 16 ranks print their startup time.
set -uo pipefail
# shellcheck source=tests/lib/common.sh
. "$TEST_SRCDIR/$TEST_WORKSPACE/tests/lib/common.sh"
WORKER="$TEST_SRCDIR/$TEST_WORKSPACE/tests/uid_worker"
DIR="${TEST_TMPDIR:-/tmp}/uid_test.$$"
mkdir -p "$DIR"

# run_job N NAME [wrong]: N ranks, each's output in $DIR/NAME.R; sets rcs.
run_job() {
  local n=$1 name=$2 mode=${3:-}
  local pids=() r
  rm -f "$DIR/$name.id"
  for ((r = 0; r < n; r++)); do
    timeout 60 "$WORKER" "$DIR/$name.id" "$r" "$n" $mode >"$DIR/$name.$r" 2>&1 &
    pids+=($!)
  done
  rcs=()
  for ((r = 0; r < n; r++)); do
    wait "${pids[$r]}"
    rcs+=($?)
  done
}

check_job() {
  local n=$1 name=$2 pattern=$3 r
  for ((r = 0; r < n; r++)); do
    if [ "${rcs[$r]}" -ne 0 ] || ! grep -qE "^rank $r $pattern" "$DIR/$name.$r"; then
      fail "$name: rank $r exited ${rcs[$r]}"
      cat "$DIR/$name.$r"
    fi
  done
}

run_job 4 four
check_job 4 four "ok"
echo "-- 4 ranks: allreduce checked on every rank"

start=$(date +%s.%N)
run_job 2 wrong wrong
check_job 2 wrong "refused"
echo "-- a wrong secret: $(cat "$DIR/wrong.1") (rank 0: $(cat "$DIR/wrong.0")) in $(seconds_since "$start" 1) s"

start=$(date +%s.%N)
run_job 16 sixteen
check_job 16 sixteen "ok"
slowest=$(cat "$DIR"/sixteen.* | awk '/init_s/ {if ($5 > m) m = $5} END {print m}')
echo "-- 16 ranks as processes: slowest kolo_comm_init_rank (from rank 0's id) $slowest s; whole job $(seconds_since "$start" 2) s"

finish uid_process_test
