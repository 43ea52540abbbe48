#!/usr/bin/env bash
# Every test, three ways: the optimized build, with CUDA compiled in
# (--config=cuda) where a CUDA toolkit is at /usr/local/cuda (GPU tests skip
# without a GPU and say so), and every code block of the README and docs/
# (tools/docs_check.py), then AddressSanitizer with
# UndefinedBehaviorSanitizer, then ThreadSanitizer (configs in .bazelrc),
# both without CUDA, which is the default build; then each fuzz target for
# FUZZ_SECONDS (default 7: each target still runs 0.2 to 5 million inputs);
# then the RDMA conformance suite over soft-RoCE in a VM (tools/rdma_suite.sh,
# about 4 minutes in the optimized pass's build; its VM image, made once, is
# made in the background while the optimized pass compiles). CI's fresh
# 2-core machine ran all of it in 1622 s on 2026-12-06, then in 3152 s on a
# slower machine, and in 2399 s on 2026-12-07; docs/testing.md has each
# part's time.
#
#   tools/test.sh [--extended] [BAZEL_TEST_ARGS...]
#
# The default run is what CI runs: every feature's tests, each C++ test
# under ASan and, where it has threads, TSan too (tests tagged
# optimized_only, the Python suites among them, run in the optimized pass
# alone; no_tsan leaves TSan), and the RDMA suite's core cases. --extended
# adds what only re-runs the same at more ranks or runs other projects'
# suites (Bazel targets tagged extended, pytest cases marked extended) and
# every case of the RDMA suite.
#
#   KOLO_CUDA       unset: CUDA if the toolkit is there, else the optimized
#                   pass runs without it and the CUDA build counts as
#                   skipped; 1: CUDA or fail; 0: without CUDA (skipped)
#   KOLO_RDMA_SUITE=0  leaves the RDMA suite out (counted as skipped)
#   KOLO_TEST_BUDGET_S the run's time budget (default 2400 s: 40 minutes): a warning
#                   past it
#
# What cannot run here for want of a privilege or a device (network
# namespaces, tc, iptables; QEMU for the RDMA suite; a CUDA toolkit) is
# skipped, one line each: "-- NAME: skipped (REASON)". A Bazel test skips by
# printing "SKIPPED: REASON" and passing (tests/lib/common.sh); it is then
# counted as skipped, not passed. Closes with a plain
# "N passed, N failed, N skipped" line counted from Bazel's per-target
# results, the fuzzers' and the RDMA suite's. Extra arguments go to every
# `bazel test`.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
extended=0
if [ "${1:-}" = --extended ]; then
  extended=1
  shift
fi
bash tools/setup.sh || exit 1
LOG="$(mktemp)"  # every counted line
PART="$(mktemp)" # one part's output
trap 'rm -f "$LOG" "$PART" "${VM_IMAGE_LOG:-}"' EXIT
status=0
FAILED_LOGS=()
note() { echo "$*" | tee -a "$LOG"; }
# Where the time goes, printed before the counts: each part's seconds, and
# after a Bazel part its slowest tests (SLOWEST, in step with TIMES: empty
# for the other parts).
TIMES=()
SLOWEST=()
started=0  # SECONDS counts from the script's start
part_start=0
timed() { TIMES+=("$1 $((SECONDS - part_start)) s"); SLOWEST+=(""); part_start=$SECONDS; }

NVCC=/usr/local/cuda/bin/nvcc
optimized=""
case "${KOLO_CUDA:-}" in
  0) note "-- cuda build: skipped (KOLO_CUDA=0; the optimized pass ran without CUDA)" ;;
  "" | auto)
    if [ -x "$NVCC" ]; then
      optimized="--config=cuda"
    else
      note "-- cuda build: skipped (no CUDA toolkit at /usr/local/cuda; the optimized pass ran without CUDA)"
    fi ;;
  *)
    if [ -x "$NVCC" ]; then
      optimized="--config=cuda"
    else
      note "-- cuda build: FAILED (no CUDA toolkit at /usr/local/cuda; KOLO_CUDA=0 builds without it)"
      status=1
    fi ;;
esac

# skip_reason TESTLOGS //pkg:name: the reason a passed test gave for skipping
# (its line "SKIPPED: REASON"), or nothing.
skip_reason() {
  local label=${2#//} file
  file="$1/${label%%:*}/${label#*:}/test.log"
  [ -f "$file" ] && grep -m1 '^SKIPPED: ' "$file" | cut -c10-
}

timed "setup (packages, Python environment)"
# The RDMA suite's VM image (debootstrap: mostly downloads and unpacking,
# about 100 s the first time) is made while the optimized pass compiles.
VM_IMAGE_LOG="$(mktemp)"
vm_image=""
if [ "${KOLO_RDMA_SUITE:-1}" != 0 ]; then
  bash tools/rdma_vm.sh build >"$VM_IMAGE_LOG" 2>&1 &
  vm_image=$!
fi

# slowest PART_OUTPUT: the part's 20 slowest test targets, from Bazel's
# summary lines ("//pkg:name  PASSED in 12.3s"; a sharded test's slowest
# shard), so that each part shows where its time went.
slowest() {
  echo "   the 20 slowest tests:"
  sed -nE 's#^(//[^ ]+) +(\(cached\) )?[A-Z ]+ in ([0-9.]+)s.*#\3 \1#p' "$1" |
    sort -rn | head -n 20 | awk '{printf "   %7.1f s  %s\n", $1, $2}'
}
# The extended set: targets tagged extended, and pytest cases marked
# extended (KOLO_TEST_EXTENDED, read by bindings/python/python_test.sh).
if [ "$extended" = 1 ]; then
  set -- --test_env=KOLO_TEST_EXTENDED=1 "$@"
  not_extended=""
else
  not_extended=",-extended"  # a tag filter's item
fi
for config in "$optimized" "--config=asan" "--config=tsan"; do
  name=${config#--config=}
  echo "== bazel test ${config:-(optimized)} //..."
  # The optimized pass builds everything (the docs' blocks and the benches
  # use it); the sanitizer passes build what their tests need
  # (--build_tests_only), which spares them the benches and tools.
  tests_only=()
  if [ "$config" = "$optimized" ]; then
    # shellcheck disable=SC2086  # an empty config is no argument
    if ! bazel build $config //...; then
      note "-- bazel build ${config:-(optimized)}: FAILED"
      status=1
      continue
    fi
  else
    tests_only=(--build_tests_only)
  fi
  # shellcheck disable=SC2086
  testlogs=$(bazel info $config bazel-testlogs 2>/dev/null)
  # The sanitizer passes leave out tests tagged optimized_only (the Python
  # suites, the launchers, transport reruns of the data path, the example
  # programs), and ThreadSanitizer those tagged no_tsan; the BUILD files
  # say which and why. The default run leaves out the extended set.
  excluded=$not_extended
  # The GPU tests skip in a build without CUDA, as the sanitizers' are.
  [ "$name" = asan ] && excluded="$excluded,-gpu,-optimized_only"
  [ "$name" = tsan ] && excluded="$excluded,-gpu,-no_tsan,-optimized_only"
  filters=()
  [ -n "$excluded" ] && filters=(--test_tag_filters="${excluded#,}")
  # shellcheck disable=SC2086
  bazel test $config //... --test_summary=short "${tests_only[@]}" "${filters[@]}" "$@" 2>&1 | tee "$PART"
  rc=${PIPESTATUS[0]}
  [ "$rc" -ne 0 ] && status=$rc
  # A test that passed by skipping is counted as skipped, with its reason.
  while IFS= read -r line; do
    if [[ "$line" =~ ^(//[^ ]+)\ +(\(cached\)\ )?PASSED ]] &&
      reason=$(skip_reason "$testlogs" "${BASH_REMATCH[1]}") && [ -n "$reason" ]; then
      note "-- ${BASH_REMATCH[1]} (${name:-optimized}): skipped ($reason)"
    else
      echo "$line" >>"$LOG"
      # A failed test's own log, shown again at the end (its tail).
      [[ "$line" =~ ^//([^ :]+):([^ ]+)\ +(\(cached\)\ )?(FAILED|TIMEOUT|FLAKY) ]] &&
        FAILED_LOGS+=("$testlogs/${BASH_REMATCH[1]}/${BASH_REMATCH[2]}/test.log")
    fi
  done <"$PART"
  timed "bazel build and test ${config:-(optimized)}"
  SLOWEST[-1]=$(slowest "$PART")
  if [ "$config" = "$optimized" ]; then
    # While bazel-bin is the optimized build: every code block of the docs.
    echo "== the docs' code blocks (tools/docs_check.py)"
    if .venv/bin/python tools/docs_check.py >"$PART" 2>&1; then
      note "-- docs code blocks: passed ($(tail -1 "$PART"))"
    else
      grep -E "FAILED" -A20 "$PART"
      note "-- docs code blocks: FAILED ($(tail -1 "$PART"))"
      status=1
    fi
    timed "docs code blocks"
  fi
done

echo "== fuzzing, ${FUZZ_SECONDS:-7} s per target"
bash tools/fuzz.sh "${FUZZ_SECONDS:-7}" 2>&1 | tee -a "$LOG"
[ "${PIPESTATUS[0]}" -ne 0 ] && status=1
timed "fuzzing"

if [ "${KOLO_RDMA_SUITE:-1}" = 0 ]; then
  note "-- rdma suite: skipped (KOLO_RDMA_SUITE=0)"
else
  echo "== RDMA conformance suite, soft-RoCE in a VM (tools/rdma_suite.sh)"
  # The image made in the background; if that failed, the suite's own probe
  # tries once more and says why.
  wait "$vm_image" || cat "$VM_IMAGE_LOG"
  # Its core cases (tools/rdma_suite.sh says which), or with --extended
  # (or KOLO_RDMA_SUITE_CASES=all) every one; in the optimized pass's
  # configuration, already built.
  cases=core
  [ "$extended" = 1 ] && cases=all
  KOLO_RDMA_SUITE_CASES=${KOLO_RDMA_SUITE_CASES:-$cases} KOLO_RDMA_SUITE_TIMEOUT=${KOLO_RDMA_SUITE_TIMEOUT:-1200} \
    KOLO_RDMA_SUITE_CONFIG="$optimized" bash tools/rdma_suite.sh 2>&1 | tee "$PART"
  rc=${PIPESTATUS[0]}
  cat "$PART" >>"$LOG"
  if [ "$rc" -ne 0 ]; then
    status=1
    # The VM may have failed before any test ran: count that too.
    grep -qE "^-- .*: FAILED" "$PART" || note "-- rdma suite: FAILED (exit $rc before its tests reported)"
  fi
fi

timed "RDMA suite"
echo "== time"
for i in "${!TIMES[@]}"; do
  echo "  ${TIMES[$i]}"
  [ -n "${SLOWEST[$i]}" ] && echo "${SLOWEST[$i]}"
done
echo "  total $((SECONDS - started)) s"
# CI stops at 90 minutes on 2 cores; past the budget, the suites need
# trimming (or moving out of the sanitizer passes) before more land.
budget=${KOLO_TEST_BUDGET_S:-2400}
if [ $((SECONDS - started)) -gt "$budget" ]; then
  echo "  WARNING: over the budget of $budget s (KOLO_TEST_BUDGET_S); see the parts above for where the time went"
fi
# The failures again, last, where a log cut to its tail still shows them:
# each failed test's last lines, then the list.
for f in "${FAILED_LOGS[@]}"; do
  echo "== the end of $f"
  tail -n 25 "$f" 2>/dev/null
done
failed_pattern="^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FLAKY)|^fuzz .*CRASH|^-- .*: FAILED"
grep -E "$failed_pattern" "$LOG" | sed 's/^/  failed: /'
passed=$(grep -cE "^//[^ ]+ +(\(cached\) )?PASSED|^fuzz .*no crash$|^-- .*: passed \(" "$LOG")
failed=$(grep -cE "$failed_pattern" "$LOG")
skipped=$(grep -cE "^-- .*: skipped \(" "$LOG")
echo "kolo tests: $passed passed, $failed failed, $skipped skipped"
exit "$status"
