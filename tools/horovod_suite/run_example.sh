#!/usr/bin/env bash
# Runs one of Horovod's own example programs, unchanged, on N local ranks
# with `horovod` resolved to kolo (this folder's stand-in package):
#
#   tools/horovod_suite/run_example.sh HOROVOD_CHECKOUT N EXAMPLE [ARGS...]
#
# EXAMPLE is a path inside the checkout, e.g.
# examples/tensorflow2/tensorflow2_synthetic_benchmark.py. Runs in the
# project's Python environment (tools/setup.sh), under kolorun, from the
# example's folder; the output is kolorun's, each line prefixed by its rank.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=tools/python_env.sh
. "$repo/tools/python_env.sh"
kolo_python_env_check || exit 2
checkout=$(cd "$1" && pwd)
n=$2
example=$3
shift 3
export HOROVOD_CHECKOUT=$checkout
export PYTHONPATH=$here:$repo/bindings/python${PYTHONPATH:+:$PYTHONPATH}
export KOLO_LIBRARY=${KOLO_LIBRARY:-$repo/bazel-bin/bindings/c/libkolo.so}
cd "$checkout/$(dirname "$example")"
exec "$repo/tools/kolorun" -np "$n" "$KOLO_PYTHON" "$(basename "$example")" "$@"
