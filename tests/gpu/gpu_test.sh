#!/usr/bin/env bash
# The GPU suite across processes sharing this machine's GPU(s): gpu_worker
# "check" on 2, 3 and 4 ranks, over CUDA IPC (the default between ranks on
# a node) and over pinned-host staging through TCP (KOLO_CUDA_IPC=0).
# Without a GPU (or without --config=cuda) it says why and passes, as the
# other tests tagged "gpu" do.
set -uo pipefail
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
KOLORUN="$ROOT/tools/kolorun"
WORKER="$ROOT/tests/gpu/gpu_worker"
export KOLO_TIMEOUT_S=120
probe=$("$WORKER" probe 2>&1 | head -1)
if [[ "$probe" == SKIP* ]]; then
  echo "SKIPPED: ${probe#SKIP: } (the GPU suite did not run)"  # tools/test.sh counts it as a skip
  exit 0
fi
status=0
for ipc in 1 0; do
  for n in 2 3 4; do
    echo "== $n ranks, KOLO_CUDA_IPC=$ipc"
    out=$(KOLO_CUDA_IPC=$ipc python3 "$KOLORUN" -np "$n" --timeout 600 "$WORKER" check 2>&1)
    rc=$?
    echo "$out" | grep -E "FAIL|ok$|failed|ranks" | head -40
    oks=$(echo "$out" | grep -cE "rank [0-9]+ ok$")
    if [ "$rc" -ne 0 ] || [ "$oks" -ne "$n" ]; then
      echo "-- $n ranks, KOLO_CUDA_IPC=$ipc: FAILED (exit $rc, $oks of $n ranks ok)"
      status=1
    fi
  done
done
exit $status
