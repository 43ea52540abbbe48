#!/usr/bin/env bash
# The transport conformance suite over RDMA: the tests TCP passes (every
# collective, dtype and count on 2..4 ranks as threads; multi-process runs
# through kolorun; faults: a killed rank, an aborted communicator, a
# mismatch), with KOLO_TRANSPORT=ib so that nothing silently falls back to
# TCP. It needs an active RDMA device; on machines without one:
#
#   bazel build //...                              # on the host, plain config
#   tools/rdma_vm.sh run -- tools/rdma_suite.sh    # soft-RoCE inside a VM
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BIN="$ROOT/bazel-bin"
export KOLO_TRANSPORT=ib
export PATH="/usr/bin:/bin:/usr/sbin:/sbin:$PATH"

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

# gtest binaries: ranks as threads, each with its own queue pairs.
for t in transport/ib/device_test tests/transport_choice_test tests/ib_fault_test tests/collectives_test tests/fault_test \
         tests/engine_test; do
  run "$t" "$BIN/$t" --gtest_brief=1
done

# Shell tests: real processes through kolorun, as Bazel runs them. (The
# engine's C test compiles its worker at run time; the VM has no compiler,
# and engine_test above runs the engine over RDMA already.)
for t in multiprocess_test kill_test; do
  tmp=$(mktemp -d)
  run "tests/$t.sh" env TEST_SRCDIR="$BIN/tests/$t.runfiles" TEST_WORKSPACE=kolo TEST_TMPDIR="$tmp" \
    bash "$ROOT/tests/$t.sh"
done

echo "rdma suite (KOLO_TRANSPORT=ib): $passed passed, $failed failed"
exit "$status"
