#!/usr/bin/env bash
# The chaos soak's short version (tools/chaos/soak.py): one fault of each
# kind (kill -9, SIGSTOP past the deadline, a slow rank, /dev/shm segments
# removed, and a host's link taken down and brought back) on 2 x 2 hosts,
# then the fatal ones again aimed at rank 0, whose process serves the store;
# no hang, no committed step lost, bit-identical parameters at the end. The
# hosts are network namespaces (kolorun --netns) where they can be made
# (root); elsewhere they are emulated by name, and the link fault is left
# out, as this says.
set -uo pipefail
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
# shellcheck source=tests/lib/common.sh
. "$ROOT/tests/lib/common.sh"
# shellcheck source=tools/python_env.sh
. "$ROOT/tools/python_env.sh"
kolo_python_env_check || exit 1
export KOLO_LIBRARY="$ROOT/bindings/c/libkolo.so" PYTHONDONTWRITEBYTECODE=1
if why=$(bash "$ROOT/tools/netns.sh" probe); then
  hosts=(--netns) kinds=kill,stop,slow,shm,link,kill0,stop0,link0 faults=8
else
  echo "chaos_test: hosts emulated by name, no link fault: no network namespaces here ($why)"
  hosts=() kinds=kill,stop,slow,shm,kill0,stop0 faults=6
fi
exec timeout 280 "$KOLO_PYTHON" "$ROOT/tools/chaos/soak.py" --faults "$faults" --kinds "$kinds" --in-order \
  --hosts h0:2,h1:2 "${hosts[@]}" --timeout 3
