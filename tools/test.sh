#!/usr/bin/env bash
# Every test, three ways: the optimized build with CUDA compiled in
# (--config=cuda, the toolkit at /usr/local/cuda; GPU tests skip without a
# GPU and say so; KOLO_CUDA=0 builds it without), then AddressSanitizer with
# UndefinedBehaviorSanitizer, then ThreadSanitizer (configs in .bazelrc),
# both without CUDA, which is the default build;
# then each fuzz target for FUZZ_SECONDS (default 20); then the RDMA
# conformance suite over soft-RoCE in a VM (tools/rdma_suite.sh, ~10 min,
# plus a minute or more to build the VM image the first time; needs root;
# KOLO_RDMA_SUITE=0 leaves it out, and says so).
# Closes with a plain "N passed, N failed" line counted from Bazel's
# per-target results, the fuzzers' and the RDMA suite's. Extra arguments go
# to every `bazel test`.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/setup.sh || exit 1
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
status=0
optimized=""
if [ "${KOLO_CUDA:-1}" != 0 ]; then
  optimized="--config=cuda"
  if [ ! -x /usr/local/cuda/bin/nvcc ]; then
    echo "-- cuda build: FAILED (no CUDA toolkit at /usr/local/cuda; KOLO_CUDA=0 builds without it)" | tee -a "$LOG"
    status=1
  fi
fi
export KOLO_BAZEL_CONFIG="$optimized"
for config in "$optimized" "--config=asan" "--config=tsan"; do
  echo "== bazel test ${config:-(optimized)} //..."
  bazel build $config //... || { status=1; continue; }
  bazel test $config //... --test_summary=short "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] && status=$rc
done
echo "== fuzzing, ${FUZZ_SECONDS:-20} s per target"
bash tools/fuzz.sh "${FUZZ_SECONDS:-20}" 2>&1 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" -ne 0 ] && status=1
if [ "${KOLO_RDMA_SUITE:-1}" = 0 ]; then
  echo "== RDMA suite left out (KOLO_RDMA_SUITE=0)"
else
  echo "== RDMA conformance suite, soft-RoCE in a VM (tools/rdma_suite.sh)"
  KOLO_RDMA_SUITE_TIMEOUT=${KOLO_RDMA_SUITE_TIMEOUT:-1200} bash tools/rdma_suite.sh 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  if [ "$rc" -ne 0 ]; then
    status=1
    # The VM may have failed before any test ran: count that too.
    grep -qE "^-- .*: FAILED" "$LOG" || echo "-- rdma suite: FAILED (exit $rc before its tests reported)" | tee -a "$LOG"
  fi
fi
passed=$(grep -cE "^//[^ ]+ +(\(cached\) )?PASSED|^fuzz .*no crash$|^-- .*: passed \(" "$LOG")
failed=$(grep -cE "^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY)|^fuzz .*CRASH|^-- .*: FAILED" "$LOG")
echo "kolo tests: $passed passed, $failed failed"
exit "$status"
