#!/usr/bin/env bash
# The main job: set up, build, and run the allreduce benchmark on N local
# ranks (default 4), printing the bus-bandwidth table.
#   tools/run_bench.sh [N] [kolo_bench flags...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash tools/setup.sh
N="${1:-4}"
shift || true
bazel build //bench:kolo_bench //bindings/c:libkolo.so
exec tools/kolorun -np "$N" --no-prefix bazel-bin/bench/kolo_bench "$@"
