#!/usr/bin/env bash
# The Python package against a real multi-process job:
#   python_test.sh N         every multirank test on N ranks under kolorun
#   python_test.sh examples  the seed examples (each starts its own job)
#   python_test.sh process_sets_4  the process-set tests on 4 ranks
# The package loads this build's libkolo.so; a sanitizer build of it needs
# its sanitizer's runtime loaded first into the (uninstrumented) interpreter.
set -uo pipefail
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
export KOLO_LIBRARY="$ROOT/bindings/c/libkolo.so"
export KOLO_TIMEOUT_S=60
export PYTHONDONTWRITEBYTECODE=1
needed=$(readelf -d "$KOLO_LIBRARY")
if echo "$needed" | grep -q libasan; then
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
  # The interpreter and torch keep memory until exit by design.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
elif echo "$needed" | grep -q libtsan; then
  export LD_PRELOAD="$(gcc -print-file-name=libtsan.so)"
fi
cd "$ROOT/bindings/python/tests" || exit 1
PYTEST=(/usr/bin/python3 -m pytest -q -p no:cacheprovider)
if [[ "$1" == examples ]]; then
  exec "${PYTEST[@]}" test_examples.py
fi
if [[ "$1" == process_sets_4 ]]; then  # overlapping sets need 3+ ranks, Adasum a power of two
  exec /usr/bin/python3 "$ROOT/tools/kolorun" -np 4 --timeout 280 "${PYTEST[@]}" multirank/test_process_sets.py
fi
exec /usr/bin/python3 "$ROOT/tools/kolorun" -np "$1" --timeout 280 "${PYTEST[@]}" multirank
