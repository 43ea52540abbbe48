#!/usr/bin/env bash
# The one command to run where a GPU is at hand: kolo's GPU path checked and
# measured, in one table, every step under `timeout`, non-zero on any wrong
# result or hang.
#
#   tools/gpu_check.sh pack [OUT.tar.gz]  # here (no GPU needed): builds with
#                                         # --config=cuda and packs binaries,
#                                         # the wheel and the scripts
#   tools/gpu_check.sh run DIR|TARBALL    # on the GPU machine (needs no
#                                         # Bazel; KOLO_GPU_PYTHON: a Python
#                                         # with torch+CUDA, default python3)
#   tools/gpu_check.sh                    # here: the host-side form: the
#                                         # strict emulated GPU's suites, then
#                                         # pack and run (GPU steps say SKIP)
#
# The steps:
#   kernels        gpu/cuda/kernels_test: every dtype x op against the host kernels
#   stream, IPC    tests/gpu/gpu_worker check on 2 processes sharing the GPU over
#                  CUDA IPC: every collective blocking and on a stream (the
#                  sequence that hung on an H100 among them), against tests/reference.h
#   stream, staged the same through pinned host memory (KOLO_CUDA_IPC=0)
#   torch          tools/gpu_check_torch.py under torchrun, 2 ranks: torch's CUDA
#                  tensors on the "kolo" backend (all_reduce, all_gather,
#                  broadcast, DDP with device_ids, FSDP2) and through kolo.torch
#                  (Horovod's API: every collective on the GPU, no host copy)
#   jax            tools/gpu_check_jax.py under kolorun, 2 ranks: kolo.jax's
#                  collectives on GPU arrays, eager and in jit, and a gradient
#   IPC speed      gpu_worker bench: allreduce busbw next to a device-to-device
#                  cudaMemcpy of the same size (the bound), rank 0's table
#   kernel speed   gpu/cuda/kernel_bench: the reduction kernel against the
#                  GPU's memory bandwidth (a copy's rate)
# NCCL refuses two ranks on one GPU, so with one GPU there is no NCCL
# figure beside kolo's; the torch step says which backend each check used.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
STEP_TIMEOUT=${KOLO_GPU_CHECK_STEP_S:-65}  # 7 steps of at most this: within 8 minutes

pack() {
  local out=${1:-$ROOT/dist/kolo-gpu-check.tar.gz}
  local stage
  stage=$(mktemp -d)
  (cd "$ROOT" && bazel build --config=cuda //gpu/cuda:kernels_test //gpu/cuda:kernel_bench //tests/gpu:gpu_worker) ||
    return 1
  mkdir -p "$stage/bin"
  for b in gpu/cuda/kernels_test gpu/cuda/kernel_bench tests/gpu/gpu_worker; do
    cp "$ROOT/bazel-bin/$b" "$stage/bin/" || return 1
  done
  KOLO_BAZEL_CONFIG=--config=cuda "$ROOT/tools/build_wheel.sh" "$stage/wheel" >/dev/null || return 1
  cp "$ROOT/tools/gpu_check.sh" "$ROOT/tools/gpu_check_torch.py" "$ROOT/tools/gpu_check_jax.py" "$stage/"
  mkdir -p "$(dirname "$out")"
  tar -czf "$out" -C "$stage" .
  rm -rf "$stage"
  echo "$out"
}

# One row of the table per step: name, PASS/FAIL/SKIP, what it found.
ROWS=()
FAILED=0
row() {
  ROWS+=("$(printf '| %-15s | %-4s | %s |' "$1" "$2" "$3")")
  [ "$2" = FAIL ] && FAILED=1
}

# Runs a step under the timeout; $OUT holds what it printed, $RC its status
# (124: it hung).
step() {
  OUT=$(timeout --kill-after=10 "$STEP_TIMEOUT" "$@" 2>&1)
  RC=$?
}

# A step that measures (NAME, what its figures are, the command): a row,
# and its figures printed whole after the table.
FIGURES=""
measure() {
  local name=$1 what=$2
  shift 2
  step "$@"
  if [[ "$OUT" == *SKIP* || "$OUT" == *"needs a GPU and found none"* ]]; then
    row "$name" SKIP "no GPU"
  elif [ "$RC" -eq 0 ]; then
    row "$name" PASS "$(echo "$OUT" | grep -E 'MiB|GiB' | tail -1)"
    FIGURES+=$'\n'"$what:"$'\n'"$OUT"$'\n'
  else
    row "$name" FAIL "exit $RC$([ "$RC" = 124 ] && echo ' (hung)')"
  fi
}

run() {
  local dir=$1
  if [ -f "$dir" ]; then
    local unpacked
    unpacked=$(mktemp -d)
    tar -xzf "$dir" -C "$unpacked" || return 1
    dir=$unpacked
  fi
  local py=${KOLO_GPU_PYTHON:-python3}
  local site="$dir/site"
  if [ ! -d "$site" ]; then
    "$py" -m pip install --quiet --no-deps --target "$site" "$dir"/wheel/kolo-*.whl || return 1
  fi
  export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
  export KOLO_TIMEOUT_S=${KOLO_TIMEOUT_S:-60}
  local kolorun=("$py" "$site/bin/kolorun")

  step "$dir/bin/kernels_test"
  if [[ "$OUT" == *"no usable GPU"* || "$OUT" == *"SKIP"* ]]; then
    row kernels SKIP "no GPU: $(echo "$OUT" | grep -m1 -oE '(no usable GPU|SKIP)[^)]*' )"
  elif [ "$RC" -eq 0 ]; then
    row kernels PASS "$(echo "$OUT" | grep -m1 -oE '[0-9]+ tests? from [0-9]+ test suites? ran')"
  else
    row kernels FAIL "exit $RC: $(echo "$OUT" | grep -m1 -E 'Failure|FAILED')"
  fi

  for ipc in 1 0; do
    local name="stream, IPC"
    [ "$ipc" = 0 ] && name="stream, staged"
    step env KOLO_CUDA_IPC=$ipc "${kolorun[@]}" -np 2 --timeout "$STEP_TIMEOUT" "$dir/bin/gpu_worker" check
    if [[ "$OUT" == *SKIP* ]]; then
      row "$name" SKIP "$(echo "$OUT" | grep -m1 -oE 'SKIP.*')"
    elif [ "$RC" -eq 0 ] && [ "$(echo "$OUT" | grep -cE 'rank [0-9]+ ok$')" -eq 2 ]; then
      row "$name" PASS "2 processes on one GPU, every collective blocking and on a stream"
    else
      row "$name" FAIL "exit $RC$([ "$RC" = 124 ] && echo ' (hung)'): $(echo "$OUT" | grep -m1 -E 'FAIL|failed|TIMEOUT')"
    fi
  done

  if ! "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    row torch SKIP "no torch with CUDA in $py"
  else
    step "$py" -m torch.distributed.run --standalone --nproc_per_node 2 "$dir/gpu_check_torch.py"
    if [ "$RC" -eq 0 ]; then
      row torch PASS "$(echo "$OUT" | grep -E '^CHECK .* ok' | sed 's/^CHECK //; s/ ok$//' | paste -sd, -)"
    else
      row torch FAIL "exit $RC$([ "$RC" = 124 ] && echo ' (hung)'): $(echo "$OUT" | grep -m1 -E '^CHECK .* FAIL|Error')"
    fi
  fi

  if ! "$py" -c 'import jax, sys; sys.exit(0 if jax.devices("gpu") else 1)' >/dev/null 2>&1; then
    row jax SKIP "no jax with CUDA in $py"
  else
    step "${kolorun[@]}" -np 2 --timeout "$STEP_TIMEOUT" "$py" "$dir/gpu_check_jax.py"
    if [ "$RC" -eq 0 ]; then
      row jax PASS "$(echo "$OUT" | grep -cE '^CHECK .* ok') checks of kolo.jax on GPU arrays, eager and in jit"
    else
      row jax FAIL "exit $RC$([ "$RC" = 124 ] && echo ' (hung)'): $(echo "$OUT" | grep -m1 -E '^CHECK .* FAIL|Error')"
    fi
  fi

  measure "IPC speed" "IPC allreduce against the device-to-device copy" \
    env KOLO_CUDA_IPC=1 "${kolorun[@]}" -np 2 --timeout "$STEP_TIMEOUT" "$dir/bin/gpu_worker" bench
  measure "kernel speed" "the reduction kernel against the memory bandwidth" "$dir/bin/kernel_bench"

  echo "| step            | what | found |"
  echo "| --- | --- | --- |"
  printf '%s\n' "${ROWS[@]}"
  printf '%s' "$FIGURES"
  return $FAILED
}

# The host-side form: what checks the GPU path without a GPU (the emulated
# GPU in strict mode fails any call that would wait for the whole device
# while a caller's stream is held; the watchdog test deadlocks it on
# purpose), then the GPU steps, which say SKIP here.
host_side() {
  # This step may build first (minutes on 2 cores): its own, longer limit.
  local per_step=$STEP_TIMEOUT
  STEP_TIMEOUT=${KOLO_GPU_CHECK_BUILD_S:-1800}
  step bash -c "cd '$ROOT' && bazel test --config=cuda //runtime:call_launcher_test //tests:gpu_collectives_test \
    //tests:gpu_collectives_more_test //tests:gpu_engine_test //gpu:all --test_output=errors"
  STEP_TIMEOUT=$per_step
  if [ "$RC" -eq 0 ]; then
    row "emulated GPU" PASS "strict mode: call_launcher_test, gpu_collectives_test, gpu_collectives_more_test, gpu_engine_test, //gpu"
  else
    row "emulated GPU" FAIL "exit $RC: $(echo "$OUT" | grep -m1 -E 'FAILED|TIMEOUT|ERROR')"
  fi
  local tarball
  tarball=$(pack "$(mktemp -d)/kolo-gpu-check.tar.gz") || {
    row pack FAIL "bazel build --config=cuda or the wheel failed"
    return 1
  }
  run "$tarball"
}

case "${1:-}" in
  pack) pack "${2:-}" ;;
  run)
    [ $# -ge 2 ] || { echo "usage: tools/gpu_check.sh run DIR|TARBALL" >&2; exit 2; }
    run "$2"
    ;;
  "") host_side ;;
  *) sed -n '2,16p' "$0"; exit 2 ;;
esac
