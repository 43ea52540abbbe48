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
echo "run_bench: building (bazel build //bench:kolo_bench)" >&2
# Bazel's progress lines and INFO messages off; warnings and errors stay.
bazel build --noshow_progress --ui_event_filters=-info //bench:kolo_bench //bindings/c:libkolo.so
echo "run_bench: $N ranks on this machine" >&2
exec tools/kolorun -np "$N" --no-prefix bazel-bin/bench/kolo_bench "$@"
