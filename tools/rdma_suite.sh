#!/usr/bin/env bash
# The transport conformance suite over RDMA: the tests TCP passes (every
# collective, blocking and asynchronous, dtype and count on 2..4 ranks as
# threads, the wire formats, point-to-point, split communicators;
# multi-process runs through kolorun, splits included; faults: a killed
# rank, an aborted communicator, a mismatch), the RDMA transport's own
# tests (memory registration and staging, a queue pair forced into error)
# and the transport choice, with KOLO_TRANSPORT=ib so that nothing silently
# falls back to TCP.
#
#   tools/rdma_suite.sh            every case (about 10 minutes in the VM)
#   KOLO_RDMA_SUITE_CASES=core tools/rdma_suite.sh
#                                  what tools/test.sh (CI) runs (about 4
#                                  minutes): what the verbs transport does
#                                  that the others do not (CORE below: its
#                                  own tests, the transport choice, faults and
#                                  revoke over queue pairs, any-source
#                                  receives, processes started and killed),
#                                  and every collective on 2 and 3 ranks (a
#                                  ring of two, and one of three with
#                                  recursive doubling's fold). The rest runs
#                                  layers above the transport (the engine,
#                                  splits, wire formats, asynchronous calls)
#                                  that TCP and shared memory run in every
#                                  pass.
#
# It builds and tests the configuration KOLO_RDMA_SUITE_CONFIG names (Bazel
# flags: tools/test.sh passes its optimized pass's, --config=cuda where a
# toolkit is, so nothing is built twice; a CUDA build runs without a GPU),
# by default the default configuration. On a machine with an active RDMA
# device it runs here, after building what it runs (suite_targets).
# Without one (this project's machines) it builds that on the host, then
# runs itself inside the soft-RoCE VM (tools/rdma_vm.sh; the image is built
# once, ~70 s) and prints the VM's output. Where the VM cannot run (no root
# to install QEMU or build the image, no mirror to fetch the kernel from,
# QEMU unable to start) it prints one line "-- rdma suite: skipped (REASON)"
# and exits 0. Exit status: the suite's.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="$ROOT/bazel-bin"

# What the suite runs (below), built on the host: the VM has no compiler.
# gtest binaries by path; the conformance suites in tests/; the shell tests
# as Bazel target:script.
UNIT_TESTS=(transport/ib/device_test transport/ib/verbs_library_test tests/transport_choice_test
            tests/ib_transport_test tests/fault_test tests/engine_test tests/resize_test)
CONFORMANCE_TESTS=(collectives_test collectives_more_test async_test point_to_point_test split_test
                   wire_format_collectives_test)
SHELL_TESTS=(multiprocess_test:multiprocess_test kill_test:kill_test split_process_test:split_test
             split_collectives_test:split_collectives_test)
# The core cases (KOLO_RDMA_SUITE_CASES=core), by the names above.
CORE=(transport/ib/device_test transport/ib/verbs_library_test tests/transport_choice_test
      tests/ib_transport_test tests/fault_test tests/resize_test collectives_test point_to_point_test
      multiprocess_test:multiprocess_test kill_test:kill_test)
# in_cases NAME: whether this run takes the case NAME.
in_cases() {
  [ "${KOLO_RDMA_SUITE_CASES:-all}" = core ] || return 0
  local c
  for c in "${CORE[@]}"; do [ "$c" = "$1" ] && return 0; done
  return 1
}
# Those alone, not //...: in a configuration that nothing else built (the
# default one, when run by hand after tools/test.sh's passes) all of it took
# 260 s on 2 cores.
suite_targets() {
  local t
  for t in "${UNIT_TESTS[@]}"; do echo "//${t%/*}:${t##*/}"; done
  for t in "${CONFORMANCE_TESTS[@]}"; do echo "//tests:$t"; done
  for t in "${SHELL_TESTS[@]}"; do echo "//tests:${t%%:*}"; done
}

has_active_rdma_port() {
  command -v ibv_devinfo > /dev/null && ibv_devinfo 2> /dev/null | grep -q "PORT_ACTIVE"
}

# KOLO_RDMA_DEV is set in the VM, which runs what the host built.
if [ -z "${KOLO_RDMA_DEV:-}" ]; then
  bash "$ROOT/tools/setup.sh" > /dev/null || exit 1
  in_vm=0
  if ! has_active_rdma_port; then
    in_vm=1
    if ! why=$("$ROOT/tools/rdma_vm.sh" probe); then
      [ -n "$why" ] || { echo "-- rdma suite: FAILED (tools/rdma_vm.sh probe failed and said nothing)"; exit 1; }
      echo "-- rdma suite: skipped (soft-RoCE VM: $why)"
      exit 0
    fi
  fi
  # shellcheck disable=SC2046  # one label per word
  # shellcheck disable=SC2086  # the configuration's flags, one per word
  bazel build ${KOLO_RDMA_SUITE_CONFIG:-} $(suite_targets) || exit 1
  if [ "$in_vm" = 1 ]; then
    log="$ROOT/.device/rdma_suite.log"  # git-ignored; the serial console is slow for long output
    mkdir -p "$(dirname "$log")"
    "$ROOT/tools/rdma_vm.sh" run --timeout "${KOLO_RDMA_SUITE_TIMEOUT:-1800}" -- \
      bash -c "KOLO_RDMA_SUITE_CASES='${KOLO_RDMA_SUITE_CASES:-all}' tools/rdma_suite.sh > '$log' 2>&1"
    status=$?
    cat "$log"
    exit "$status"
  fi
fi

# Only here, after the host's build: Bazel keys its actions on PATH, so
# changing it before `bazel build` would recompile everything tools/test.sh
# built. The tests below want Debian's tools (python3 for kolorun) first.
export PATH="/usr/bin:/bin:/usr/sbin:/sbin:$PATH"
export KOLO_TRANSPORT=ib

ibv_devinfo 2>&1 | grep -E "hca_id|state|link_layer|active_mtu" || echo "no ibv_devinfo here"
status=0
passed=0
failed=0
run() {
  local name=$1
  shift
  echo "== $name"
  local start=$SECONDS
  if "$@"; then
    echo "-- $name: passed ($((SECONDS - start)) s)"
    passed=$((passed + 1))
  else
    echo "-- $name: FAILED ($((SECONDS - start)) s)"
    failed=$((failed + 1))
    status=1
  fi
}

# gtest binaries: ranks as threads, each with its own queue pairs (revoke,
# shrink and grow too, in resize_test).
for t in "${UNIT_TESTS[@]}"; do
  in_cases "$t" && run "$t" "$BIN/$t" --gtest_brief=1
done
# Every collective, dtype, op and count on 2..4 ranks (the core run:
# collectives_test on 2 and 3, a dtype of each width, two ops), blocking and
# asynchronous; point-to-point; split communicators; the wire formats
# (compressed allreduce: every format bit-identical on every rank). (N=1
# moves nothing; 5..8 ranks, which the host runs over TCP, would put 8
# threads on the VM's 4 emulated CPUs and more than double the suite's
# time.)
# The shared-memory arena's sweep is left out: over RDMA the arena does not
# apply, and the sweep repeats what the tables choose, which the other cases
# run already (without it, collectives_test took 75 s in the VM, not 341 s).
for t in "${CONFORMANCE_TESTS[@]}"; do
  in_cases "$t" || continue
  filter='-*/N1:*/N1_split:*/N5*:*/N6*:*/N7*:*/N8*:*SharedMemoryArena*'
  sweep=all
  if [ "${KOLO_RDMA_SUITE_CASES:-all}" = core ] && [ "$t" = collectives_test ]; then
    # The core run: 2 and 3 ranks, and a dtype of each width with two ops
    # (the transport carries bytes; every dtype and op in the full run).
    filter='*/N2:*/N3:-*SharedMemoryArena*'
    sweep=widths
  fi
  run "tests/$t" env KOLO_TEST_SWEEP="$sweep" "$BIN/tests/$t" --gtest_brief=1 --gtest_filter="$filter"
done

# Shell tests: real processes through kolorun, as Bazel runs them. (The
# engine's C test compiles its worker at run time; the VM has no compiler,
# and engine_test above runs the engine over RDMA already.)
for t in "${SHELL_TESTS[@]}"; do
  in_cases "$t" || continue
  target=${t%%:*} script=${t#*:}
  tmp=$(mktemp -d)
  run "tests/$script.sh" env TEST_SRCDIR="$BIN/tests/$target.runfiles" TEST_WORKSPACE=kolo TEST_TMPDIR="$tmp" \
    bash "$ROOT/tests/$script.sh"
done

echo "rdma suite (KOLO_TRANSPORT=ib): $passed passed, $failed failed"
exit "$status"
