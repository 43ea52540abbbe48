#!/usr/bin/env bash
# DDP training steps on torch.distributed's kolo backend against gloo, in
# the same job, for N = 2 and 4 local ranks (bench/ddp_bench.py says what
# is timed):
#   bash bench/ddp_bench.sh [RANKS...] [-- ddp_bench.py options]
# Builds libkolo.so (optimized) and runs from a copy of it.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
ranks=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do ranks+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ ${#ranks[@]} -eq 0 ] && ranks=(2 4)
build_and_copy ddp //bindings/c:libkolo.so
# shellcheck source=tools/python_env.sh
. tools/python_env.sh
kolo_python_env_check || exit 1
export KOLO_LIBRARY="$WORK/libkolo.so"
for n in "${ranks[@]}"; do
  "$KOLO_PYTHON" tools/kolorun -np "$n" --timeout 900 --no-prefix "$KOLO_PYTHON" bench/ddp_bench.py "$@" |
    grep -v '^$' || exit 1
  echo
done
