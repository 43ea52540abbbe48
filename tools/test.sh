#!/usr/bin/env bash
# Every test, three ways: the optimized build, then AddressSanitizer with
# UndefinedBehaviorSanitizer, then ThreadSanitizer (configs in .bazelrc);
# then each fuzz target for FUZZ_SECONDS (default 20).
# Closes with a plain "N passed, N failed" line counted from Bazel's
# per-target results. Extra arguments go to every `bazel test`.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/setup.sh || exit 1
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
status=0
for config in "" "--config=asan" "--config=tsan"; do
  echo "== bazel test ${config:-(optimized)} //..."
  bazel build $config //... || { status=1; continue; }
  bazel test $config //... --test_summary=short "$@" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] && status=$rc
done
echo "== fuzzing, ${FUZZ_SECONDS:-20} s per target"
bash tools/fuzz.sh "${FUZZ_SECONDS:-20}" 2>&1 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" -ne 0 ] && status=1
passed=$(grep -cE "^//[^ ]+ +(\(cached\) )?PASSED|^fuzz .*no crash$" "$LOG")
failed=$(grep -cE "^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY)|^fuzz .*CRASH" "$LOG")
echo "kolo tests: $passed passed, $failed failed"
exit "$status"
