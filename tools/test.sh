#!/usr/bin/env bash
# Every test: set up, build everything, run `bazel test //...`, and close with
# a plain "N passed, N failed" line counted from Bazel's per-target results.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/setup.sh || exit 1
bazel build //... || exit 1
LOG="$(mktemp)"
trap 'rm -f "$LOG"' EXIT
bazel test //... --test_summary=short "$@" 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
passed=$(grep -cE "^//[^ ]+ +(\(cached\) )?PASSED" "$LOG")
failed=$(grep -cE "^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY)" "$LOG")
echo "kolo tests: $passed passed, $failed failed"
exit "$status"
