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
# shellcheck source=tools/horovod_suite/suite_env.sh
. "$(dirname "$0")/suite_env.sh"  # here, repo, checkout; the environment
n=$2
example=$3
shift 3
cd "$checkout/$(dirname "$example")"
exec "$repo/tools/kolorun" -np "$n" "$KOLO_PYTHON" "$(basename "$example")" "$@"
