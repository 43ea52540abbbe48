#!/usr/bin/env bash
# docs/compression.md's training curves: the ResNet-style example
# (examples/resnet_compression.py) and the function-approximation seed
# (examples/function_approximation.py) on K emulated hosts at RATE, once
# per compression, then one PNG of their losses against seconds and steps.
#   sudo bash bench/compression_training.sh OUT_DIR [K] [RATE]   (default 4 1gbit)
# MODES ("none bf16 int8 int8+ef"), RESNET_STEPS (150), SEED_STEPS (2000).
set -euo pipefail
OUT="${1:?usage: compression_training.sh OUT_DIR [K] [RATE]}"
K="${2:-4}"
RATE="${3:-1gbit}"
MODES="${MODES:-none bf16 int8 int8+ef}"
RESNET_STEPS="${RESNET_STEPS:-150}"
SEED_STEPS="${SEED_STEPS:-2000}"
export KOLO_NETNS_PREFIX="${KOLO_NETNS_PREFIX:-kt-}"
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
why=$(bash tools/netns.sh probe) || { echo "compression_training: cannot emulate hosts here: $why" >&2; exit 1; }
bazel build -c opt //bindings/c:libkolo.so >/dev/null 2>&1 || bazel build -c opt //bindings/c:libkolo.so
trap 'bash tools/netns.sh down' EXIT
bash tools/netns.sh up "$K" "$RATE"
mkdir -p "$OUT"
export KOLO_LIBRARY="$ROOT/bazel-bin/bindings/c/libkolo.so" OMP_NUM_THREADS=1
for mode in $MODES; do
  tag=${mode/+/_}
  (cd examples && python3 "$ROOT/tools/kolorun" -np "$K" --netns "${KOLO_NETNS_PREFIX}:$K" \
     "$ROOT/.venv/bin/python" resnet_compression.py --steps "$RESNET_STEPS" --log-every 5 \
     --compression "$mode" --curve "$OUT/resnet_$tag.csv") | grep -E "parameters|time per step|step +$RESNET_STEPS "
  (cd examples && python3 "$ROOT/tools/kolorun" -np "$K" --netns "${KOLO_NETNS_PREFIX}:$K" \
     "$ROOT/.venv/bin/python" function_approximation.py --steps "$SEED_STEPS" --log-every 50 \
     --compression "$mode" --curve "$OUT/seed_$tag.csv" --output-dir "$OUT/seed_$tag") |
    grep -E "time per step|final error"
done
"$ROOT/.venv/bin/python" bench/plot_training_curves.py "$OUT" "$K hosts at $RATE" $MODES
