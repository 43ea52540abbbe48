#!/usr/bin/env bash
# The chaos soak's short version (tools/chaos/soak.py): 4 faults, one of
# each kind (kill -9, SIGSTOP past the deadline, a slow rank, /dev/shm
# segments removed), on 2 x 2 emulated hosts; no hang, no committed step
# lost, bit-identical parameters at the end.
set -uo pipefail
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
# shellcheck source=tests/lib/common.sh
. "$ROOT/tests/lib/common.sh"
# shellcheck source=tools/python_env.sh
. "$ROOT/tools/python_env.sh"
kolo_python_env_check || exit 1
export KOLO_LIBRARY="$ROOT/bindings/c/libkolo.so" PYTHONDONTWRITEBYTECODE=1
exec timeout 280 "$KOLO_PYTHON" "$ROOT/tools/chaos/soak.py" --faults 4 --kinds kill,stop,slow,shm --in-order \
  --hosts h0:2,h1:2 --timeout 3
