#!/usr/bin/env bash
# Shrink and grow across processes (tests/resize_worker.c), over shared
# memory and over TCP: in a world of 4, rank 2 kills itself (SIGKILL) in the
# middle of an allreduce loop; the survivors shrink without naming it
# (the store sees its process end), check the new numbering and sums, and
# grow back to 4 with a replacement process that joins by the grow's id.
# Then rank 2 stops itself (SIGSTOP) instead: alive and stuck, holding its
# connections; the others time out (KOLO_TIMEOUT_S=4) and shrink around it
# within their deadline.
# Then the same two faults strike rank 0, whose process serves the
# rendezvous store: the survivors move to rank 1's standby store. Killed,
# it is named by the survivors (exclude {0}, no flags), who then grow back
# over the new store and lose the grown communicator's rank 0 in turn (the
# replacement follows the store too); stopped, nobody names it. Last, rank
# 0 killed under kolorun --enable-recovery: the job goes on and succeeds.
set -uo pipefail
# shellcheck source=tests/lib/common.sh
. "$TEST_SRCDIR/$TEST_WORKSPACE/tests/lib/common.sh"
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
WORKER="$ROOT/tests/resize_worker"
OUT="${TEST_TMPDIR:-/tmp}/resize_out"
n=4
victim=2

# start_ranks ARGS...: the world's n ranks, with the variables in $common,
# each running `resize_worker survive $victim ARGS...`; their pids in $pids.
start_ranks() {
  local r
  pids=()
  for ((r = 0; r < n; r++)); do
    env KOLO_RANK="$r" KOLO_WORLD_SIZE="$n" "${common[@]}" "$WORKER" survive "$victim" "$@" >"$OUT.$r" 2>&1 &
    pids+=($!)
  done
}

# await_survivors LABEL SHOWN [KILLED]: every rank but the victim must exit
# 0 and say it survived, but rank KILLED, which must end by its SIGKILL;
# prints the survivors' lines matching SHOWN.
await_survivors() {
  local r rc
  for ((r = 0; r < n; r++)); do
    [ "$r" -eq "$victim" ] && continue
    wait "${pids[$r]}"
    rc=$?
    if [ "$r" = "${3:-}" ]; then
      [ "$rc" -eq 137 ] || { fail "$1: rank $r exited $rc, not by its SIGKILL"; cat "$OUT.$r"; }
    elif [ "$rc" -ne 0 ] || ! grep -q "rank $r survived" "$OUT.$r"; then
      fail "$1: rank $r exited $rc"
      cat "$OUT.$r"
    else
      grep "$2" "$OUT.$r"
    fi
  done
}

for transport in shm tcp; do
  echo "== over $transport"
  id_file="${TEST_TMPDIR:-/tmp}/grow_id.$transport"
  rm -f "$id_file" "$OUT".*
  common=(KOLO_MASTER_ADDR=127.0.0.1 KOLO_MASTER_PORT="$(free_port)" KOLO_TIMEOUT_S=30 KOLO_TRANSPORT="$transport"
    KOLO_SECRET=resize-test GROW_ID_FILE="$id_file")
  start_ranks
  env "${common[@]}" "$WORKER" join "$n" >"$OUT.join" 2>&1 &
  joiner=$!
  started=$(date +%s.%N)
  await_survivors "$transport" "shrank\|grown"
  wait "${pids[$victim]}"
  rc=$?
  [ "$rc" -eq 137 ] || fail "$transport: the victim exited $rc, not by its SIGKILL"
  wait "$joiner"
  rc=$?
  if [ "$rc" -ne 0 ] || ! grep -q "rank 3 of 4 in the grown communicator" "$OUT.join"; then
    fail "$transport: the replacement exited $rc"
    cat "$OUT.join"
  else
    grep "replacement" "$OUT.join"
  fi
  echo "-- $transport: $(seconds_since "$started" 1) s in all"
done

# stuck_rank LABEL ARGS...: the victim stops itself; the survivors must
# go on, and the victim, woken, must fail rather than hang.
stuck_rank() {
  local label=$1 started took rc
  shift
  echo "== $label"
  rm -f "$OUT".*
  common=(KOLO_MASTER_ADDR=127.0.0.1 KOLO_MASTER_PORT="$(free_port)" KOLO_TIMEOUT_S=4 KOLO_SECRET=resize-test)
  start_ranks stop "$@"
  started=$(date +%s.%N)
  await_survivors "$label" "failed\|shrank"
  took=$(seconds_since "$started" 1)
  echo "-- the survivors went on and finished after ${took} s (deadline 4 s to notice, 4 s to shrink)"
  # Woken, the stuck rank finds itself left out: it fails, it does not hang.
  kill -CONT "${pids[$victim]}" 2>/dev/null
  wait "${pids[$victim]}"
  rc=$?
  if [ "$rc" -eq 0 ]; then
    fail "$label: the stuck rank, woken, exited 0"
  else
    echo "-- the stuck rank, woken, exited $rc: $(grep 'failed' "$OUT.$victim" | tail -1 | cut -c1-200)"
  fi
}

stuck_rank "a stuck rank, over shm"

victim=0
echo "== rank 0, the store's host, killed; over tcp, named by the survivors, who grow back over the new store"
id_file="${TEST_TMPDIR:-/tmp}/grow_id.rank0"
rm -f "$id_file" "$OUT".*
common=(KOLO_MASTER_ADDR=127.0.0.1 KOLO_MASTER_PORT="$(free_port)" KOLO_TIMEOUT_S=4 KOLO_TRANSPORT=tcp
  KOLO_SECRET=resize-test GROW_ID_FILE="$id_file" KOLO_LOG_LEVEL=info LOSE_GROWN_RANK_0=1)
start_ranks kill named
env "${common[@]}" "$WORKER" join "$n" >"$OUT.join" 2>&1 &
joiner=$!
# The grown communicator's rank 0 (world rank 1, the store's host since the
# first shrink) then kills itself too: the others fail over a second time.
await_survivors "rank 0 killed" "shrank\|grown\|standby store\|losing" 1
wait "${pids[$victim]}"
rc=$?
[ "$rc" -eq 137 ] || fail "rank 0 killed: it exited $rc, not by its SIGKILL"
wait "$joiner"
rc=$?
if [ "$rc" -ne 0 ] || ! grep -q "rank 2 of 3 after losing" "$OUT.join"; then
  fail "rank 0 killed: the replacement exited $rc"
  cat "$OUT.join"
else
  grep "replacement\|standby store" "$OUT.join"
fi

stuck_rank "rank 0, the store's host, stuck; over shm, nobody names it"

echo "== rank 0 killed under kolorun --enable-recovery: the job goes on and succeeds"
KOLORUN="$ROOT/tools/kolorun"
timeout 120 "$KOLORUN" -np 4 --enable-recovery env KOLO_TIMEOUT_S=4 "$WORKER" survive 0 kill named >"$OUT.kolorun" 2>&1
rc=$?
if [ "$rc" -ne 0 ] || [ "$(grep -c "survived" "$OUT.kolorun")" -ne 3 ] ||
  ! grep -q "rank 0 on host .* exited with status 137; the others go on" "$OUT.kolorun" ||
  ! grep -q "the job went on after 1 failure" "$OUT.kolorun"; then
  fail "kolorun --enable-recovery: exited $rc"
  cat "$OUT.kolorun"
else
  grep "shrank\|go on\|went on" "$OUT.kolorun"
fi
# Without it, the same job ends at the first failure, as before.
timeout 120 "$KOLORUN" -np 4 env KOLO_TIMEOUT_S=4 "$WORKER" survive 0 kill named >"$OUT.kolorun" 2>&1
rc=$?
[ "$rc" -eq 137 ] || { fail "kolorun without --enable-recovery: exited $rc, not 137 (rank 0's SIGKILL)"; cat "$OUT.kolorun"; }

finish resize_process_test
