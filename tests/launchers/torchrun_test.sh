#!/usr/bin/env bash
# kolo under torch 2.13's real torchrun: the agent serves a c10d
# TCPStore on MASTER_ADDR:MASTER_PORT and kolo's ranks join it as clients.
# 2 ranks of the C worker and of a Python script; PyTorch Lightning's
# Trainer on kolo against gloo, 2 ranks; a kolo.tensorflow program on 2. The
# extended set (tools/test.sh --extended) adds 3 ranks of the first two and
# 4 of Lightning.
set -uo pipefail
# shellcheck source=tests/launchers/lib.sh
source "$TEST_SRCDIR/$TEST_WORKSPACE/tests/launchers/lib.sh"
trap 'rm -rf "$WORK"' EXIT

# --tee 1 copies each worker's stdout, prefixed, to ours.
torchrun() {
  echo "$KOLO_VENV/bin/torchrun" --nproc_per_node "$1" --redirects 2 --tee 1 --master_port "$(free_port)" \
    --log_dir "$WORK/logs" --no_python
}
sizes=(2)
extended && sizes+=(3)  # a size other than 2
for n in "${sizes[@]}"; do
  read -ra TORCHRUN <<<"$(torchrun "$n")"
  run_job "torchrun-c-$n" "$n" "rank %r ok" 120 "${TORCHRUN[@]}" "$WORKER" "$n"
  read -ra TORCHRUN <<<"$(torchrun "$n")"
  run_job "torchrun-python-$n" "$n" "python rank %r of $n ok" 120 "${TORCHRUN[@]}" "${PYRANK[@]}" "$n"
done
# PyTorch Lightning's DDPStrategy(process_group_backend="kolo") under
# torchrun (optimized pass: torch under a sanitizer needs more than a preload).
if [ ${#TORCH_RANK[@]} -gt 0 ]; then
  sizes=(2)
  extended && sizes+=(4)
  for n in "${sizes[@]}"; do
    lightning_on "torchrun-lightning-$n" "$n" "$KOLO_VENV/bin/torchrun" --nproc_per_node "$n" \
      --master_port "$(free_port)" --log_dir "$WORK/logs" --no_python
  done
  # A TensorFlow program starts the same way (torchrun --no_python).
  read -ra TORCHRUN <<<"$(torchrun 2)"
  run_job "torchrun-tensorflow-2" 2 "tensorflow rank %r of 2 ok" 180 "${TORCHRUN[@]}" "${TENSORFLOW_RANK[@]}" 2
else
  echo "torchrun-lightning, torchrun-tensorflow: not in this pass (a sanitizer build: torch and TensorFlow run" \
    "in the optimized pass)"
fi
grep -q "cannot serve the rendezvous store" "$WORK"/*.out && fail "a rank tried to serve its own store"
finish torchrun_test
