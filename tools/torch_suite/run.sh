#!/usr/bin/env bash
# Runs PyTorch's torch.distributed conformance suite (DistributedTest.
# _DistTestBase, shipped in the torch 2.13 wheel) for one backend:
#
#   tools/torch_suite/run.sh BACKEND [WORLD_SIZE] [PYTEST_ARGS...]
#   tools/torch_suite/run.sh kolo 2 -k 'all_reduce or broadcast'
#
# BACKEND is gloo, or kolo (registered by `import kolo.torch`). Every
# backend runs the same tests; those the suite itself reserves for gloo
# show as skipped. Ends with "BACKEND N ranks: P passed, F failed, S
# skipped" and the wall time; the JUnit report and pytest's log stay in
# $TORCH_SUITE_OUT (default a new /tmp/torch_suite.* directory).
# Runs in the project's Python environment (tools/setup.sh makes it: torch,
# pytest, and the expecttest and hypothesis the suite imports).
# TORCH_SUITE_SELECT and TORCH_SUITE_EXCLUDE pick tests by name
# (select_tests.py). TORCH_SUITE_UNSKIP=test_a,test_b runs tests the
# suite skips for this backend (see run_suite.py). The per-test timeout is
# the suite's own (300 s; DISTRIBUTED_TESTS_DEFAULT_TIMEOUT overrides it);
# the suite's process groups have a 60 s timeout, and kolo's new_group()s
# without one get KOLO_TIMEOUT_S (30 here) instead of torch's 30 minutes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=tools/python_env.sh
. "$repo/tools/python_env.sh"
kolo_python_env_check || exit 2
backend=$1
ranks=${2:-2}
shift $(($# < 2 ? $# : 2))
out=${TORCH_SUITE_OUT:-$(mktemp -d /tmp/torch_suite.XXXXXX)}
mkdir -p "$out"

export BACKEND=$backend WORLD_SIZE=$ranks
export TEMP_DIR=$out/temp  # the suite makes a fresh one per test (setUp); this one is for import
mkdir -p "$TEMP_DIR"
# As torch's run_test.py's init-file variant (the one the spawned ranks use
# anyway: each test's ranks meet on a FileStore). Read by skip decorators.
export INIT_METHOD=${INIT_METHOD:-file://$TEMP_DIR/}
# KOLO_PYTHON_DIR: another copy of bindings/python (a snapshot, while the
# tree is being edited).
export PYTHONPATH=$here:${KOLO_PYTHON_DIR:-$repo/bindings/python}${PYTHONPATH:+:$PYTHONPATH}
export KOLO_LIBRARY=${KOLO_LIBRARY:-$repo/bazel-bin/bindings/c/libkolo.so}
export KOLO_TIMEOUT_S=${KOLO_TIMEOUT_S:-30}
# A sanitizer build in bazel-bin (a --config=asan/tsan build leaves one
# there) cannot be loaded into a plain python3: the ranks would die at
# import. Say so instead; KOLO_LIBRARY can name another build.
if [ "$backend" = kolo ] && readelf -d "$KOLO_LIBRARY" 2>/dev/null | grep -q 'NEEDED.*lib[at]san'; then
  echo "$KOLO_LIBRARY is a sanitizer build; set KOLO_LIBRARY to a plain one (bazel-out/k8-opt/bin/bindings/c/libkolo.so.0)" >&2
  exit 2
fi

start=$(date +%s)
set +e
# -c /dev/null: no repository pytest configuration; -p no:cacheprovider: no
# .pytest_cache in the tree. The module is named on the command line, so
# pytest collects it despite its name.
"$KOLO_PYTHON" -m pytest -c /dev/null --rootdir "$here" -p no:cacheprovider -p select_tests -rN -q \
  --junitxml="$out/report.xml" "$here/run_suite.py" "$@" > "$out/pytest.log" 2>&1
status=$?
set -e
seconds=$(($(date +%s) - start))
tail -1 "$out/pytest.log"
if [ -f "$out/report.xml" ]; then
  "$KOLO_PYTHON" "$here/summarize.py" "$backend" "$ranks" "$out/report.xml"
fi
echo "wall time ${seconds} s; report $out/report.xml, log $out/pytest.log"
exit $status
