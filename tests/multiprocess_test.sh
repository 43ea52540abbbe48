#!/usr/bin/env bash
# Real multi-process runs: kolorun, every launcher's variable names, and a
# rank that never arrives. Each case checks exit codes and output.
set -uo pipefail
# shellcheck source=tests/lib/common.sh
. "$TEST_SRCDIR/$TEST_WORKSPACE/tests/lib/common.sh"
KOLORUN="$TEST_SRCDIR/$TEST_WORKSPACE/tools/kolorun"
WORKER="$TEST_SRCDIR/$TEST_WORKSPACE/tests/mp_worker"
OUT="${TEST_TMPDIR:-/tmp}/mp_out"

# 1. kolorun: 3 ranks run every collective and verify; lines carry rank prefixes.
if timeout 120 "$KOLORUN" -np 3 "$WORKER" check >"$OUT" 2>&1; then
  for r in 0 1 2; do
    grep -q "^\[$r\] rank $r ok" "$OUT" || fail "kolorun: rank $r did not report ok"
  done
  grep -q "^\[1\] rank 1 of 3, local 1 of 3" "$OUT" || fail "kolorun: rank/local rank not as launched"
else
  fail "kolorun -np 3 exited $?"; cat "$OUT"
fi

# 2. kolorun ends the others when one rank fails, and passes its status on.
start=$(date +%s)
timeout 60 "$KOLORUN" -np 3 sh -c 'if [ "$KOLO_RANK" = 1 ]; then exit 7; fi; sleep 50' >"$OUT" 2>&1
rc=$?
[ "$rc" = 7 ] || fail "kolorun returned $rc when rank 1 exited 7"
[ $(( $(date +%s) - start )) -lt 20 ] || fail "kolorun did not end the surviving ranks promptly"

# Starts world size $1 ranks by hand with per-rank variables from $2 (a
# function name that prints the env assignments for rank $r), waits for all.
run_by_hand() {
  local n=$1 envfn=$2 mode=$3 pids=() r
  for ((r = 0; r < n; r++)); do
    env -u KOLO_RANK $($envfn "$r" "$n") "$WORKER" "$mode" >"$OUT.$r" 2>&1 &
    pids+=($!)
  done
  local status=0
  for ((r = 0; r < n; r++)); do wait "${pids[$r]}" || status=$?; done
  return $status
}

PORT=$(free_port)
torchrun_env() { echo "RANK=$1 WORLD_SIZE=$2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT"; }
ompi_env() { echo "OMPI_COMM_WORLD_RANK=$1 OMPI_COMM_WORLD_SIZE=$2 OMPI_COMM_WORLD_LOCAL_RANK=$1 OMPI_COMM_WORLD_LOCAL_SIZE=$2 KOLO_MASTER_ADDR=127.0.0.1 KOLO_MASTER_PORT=$PORT"; }
slurm_env() { echo "SLURM_PROCID=$1 SLURM_NTASKS=$2 SLURM_LOCALID=$1 MASTER_ADDR=127.0.0.1 MASTER_PORT=$PORT"; }

# 3. torchrun's, Open MPI's and Slurm's names; torchrun gives no local rank,
#    so it is derived from host identity through the rendezvous.
for launcher in torchrun ompi slurm; do
  PORT=$(free_port)
  if run_by_hand 2 "${launcher}_env" check; then
    grep -q "rank 1 of 2, local 1 of 2" "$OUT.1" || fail "$launcher: wrong rank or local rank: $(cat "$OUT.1")"
    grep -q "rank 0 ok" "$OUT.0" || fail "$launcher: rank 0 not ok"
  else
    fail "$launcher variables: a rank failed"; cat "$OUT".*
  fi
done

# 4. A rank that never arrives: 3 of 4 ranks start; each must fail with
#    KOLO_ERR_TIMEOUT (exit 10 + 3) naming rank 3, within the deadline.
PORT=$(free_port)
partial_env() { echo "KOLO_RANK=$1 KOLO_WORLD_SIZE=4 KOLO_MASTER_ADDR=127.0.0.1 KOLO_MASTER_PORT=$PORT KOLO_TIMEOUT_S=3"; }
start=$(date +%s)
pids=()
for r in 0 1 2; do
  env $(partial_env $r) "$WORKER" init >"$OUT.$r" 2>&1 &
  pids+=($!)
done
for r in 0 1 2; do
  wait "${pids[$r]}"
  rc=$?
  [ "$rc" = 13 ] || fail "missing rank: rank $r exited $rc, expected 13 (timeout): $(cat "$OUT.$r")"
  grep -q "rank(s) 3 never arrived" "$OUT.$r" || fail "missing rank: rank $r's error does not name rank 3: $(cat "$OUT.$r")"
done
elapsed=$(( $(date +%s) - start ))
[ "$elapsed" -lt 30 ] || fail "missing rank: took ${elapsed}s"

# 5. Rank 0 never arrives: nobody serves the store, so the others time out
#    saying where they looked.
PORT=$(free_port)
env $(partial_env 1) "$WORKER" init >"$OUT.1" 2>&1
rc=$?
[ "$rc" = 13 ] || fail "no rank 0: exited $rc, expected 13"
grep -q "rendezvous store at 127.0.0.1:$PORT" "$OUT.1" || fail "no rank 0: message does not name the store: $(cat "$OUT.1")"

# 6. Ranks with different secrets: the odd one out is refused (AUTH, exit
#    10 + 7), the others time out naming it, and no secret is ever printed.
PORT=$(free_port)
secret_env() {
  echo "KOLO_RANK=$1 KOLO_WORLD_SIZE=2 KOLO_MASTER_ADDR=127.0.0.1 KOLO_MASTER_PORT=$PORT KOLO_TIMEOUT_S=3 KOLO_LOG_LEVEL=debug KOLO_SECRET=sekrit-$(( $1 == 1 ? 999 : 111 ))"
}
env $(secret_env 0) "$WORKER" init >"$OUT.0" 2>&1 &
p0=$!
env $(secret_env 1) "$WORKER" init >"$OUT.1" 2>&1
rc1=$?
wait $p0
rc0=$?
[ "$rc1" = 17 ] || fail "wrong secret: rank 1 exited $rc1, expected 17 (auth): $(cat "$OUT.1")"
[ "$rc0" = 13 ] || fail "wrong secret: rank 0 exited $rc0, expected 13 (timeout)"
grep -q "rank(s) 1 never arrived" "$OUT.0" || fail "wrong secret: rank 0 does not name rank 1"
if grep -q "sekrit" "$OUT.0" "$OUT.1"; then fail "a secret appeared in the output"; fi

# 7. kolorun gives each job its own secret, and the job works with it.
timeout 60 "$KOLORUN" -np 2 sh -c 'test ${#KOLO_SECRET} -ge 32 && exec "$0" check' "$WORKER" >"$OUT" 2>&1 ||
  fail "kolorun job with its generated secret failed: $(cat "$OUT")"

finish multiprocess_test
