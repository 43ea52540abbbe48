#!/usr/bin/env bash
# The Python package against a real multi-process job:
#   python_test.sh N         every multirank test on N ranks under kolorun
#   python_test.sh examples  the seed examples (each starts its own job)
#   python_test.sh process_sets_4  the process-set tests on 4 ranks
#   python_test.sh torch_N   the torch.distributed backend's tests on N
#                            ranks (under the real torchrun for 2, 4 and 16,
#                            kolorun for 3); torch_2 also starts jobs rank
#                            by rank (init methods, failures)
#   python_test.sh torch_programs_N  real torch.distributed programs
#                            (tests/torch_programs) on N ranks, kolo
#                            against gloo
#   python_test.sh tensorflow_N  kolo.tensorflow's and kolo.keras's tests
#                            on N ranks (Keras 3 on its tensorflow backend,
#                            and on 2 ranks its torch backend; Keras 2,
#                            tf_keras); tensorflow_2
#                            also starts jobs rank by rank (failures), and
#                            checks that every front end (NumPy, torch,
#                            torch.distributed, TensorFlow) reduces the same
#                            dtypes and ops (test_dtype_policy.py)
#   python_test.sh tensorflow_examples  the TensorFlow and Keras seed twins
#   python_test.sh jax       kolo.jax's tests on 2 ranks (those that need 3 on 3;
#                            all on 3 in the extended set), and the JAX seed twins
#   python_test.sh torchft   torchft's Manager on kolo: a replica group
#                            killed mid-step heals and rejoins
#   python_test.sh elastic   elastic jobs: kolo.torch.elastic under kolorun's
#                            driver, torch's shrink_group, and torchrun's
#                            restarts
# The package loads this build's libkolo.so; a sanitizer build of it needs
# its sanitizer's runtime loaded first into the (uninstrumented) interpreter.
set -uo pipefail
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
# shellcheck source=tests/lib/common.sh
. "$ROOT/tests/lib/common.sh"  # skip, free_port, library_sanitizer, KOLO_TEST_BUILD_CACHE
# shellcheck source=tools/python_env.sh
. "$ROOT/tools/python_env.sh"
kolo_python_env_check || exit 1
export KOLO_LIBRARY="$ROOT/bindings/c/libkolo.so"
export KOLO_TIMEOUT_S=60
export PYTHONDONTWRITEBYTECODE=1
sanitizer=$(library_sanitizer "$KOLO_LIBRARY")
if [ "$sanitizer" = asan ]; then
  # libstdc++ too: ASan resolves __cxa_throw as it starts, and the
  # interpreter loads libstdc++ only later (torch's exceptions would abort).
  export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libstdc++.so.6)"
  # The interpreter and torch keep memory until exit by design.
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
elif [ "$sanitizer" = tsan ]; then
  export LD_PRELOAD="$(gcc -print-file-name=libtsan.so)"
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$ROOT/bindings/python/tsan_torch.supp"
fi
cd "$ROOT/bindings/python/tests" || exit 1
# Cases marked extended (more ranks or other projects' tests of what the
# rest already covers) run only in tools/test.sh --extended, which sets
# KOLO_TEST_EXTENDED=1.
PYTEST=("$KOLO_PYTHON" -m pytest -q -p no:cacheprovider --durations=8
        -o "markers=extended: run only by tools/test.sh --extended")
[ "${KOLO_TEST_EXTENDED:-0}" = 1 ] || PYTEST+=(-m "not extended")
if [[ "$1" == launcher ]]; then  # kolorun's pure parts (ssh_test runs it across hosts), the package's shape,
  # and the framework-free logic the front ends share
  PYTHONPATH="$ROOT/bindings/python" exec "${PYTEST[@]}" test_launcher.py test_core_binding.py \
    test_horovodrun_flags.py test_package_layout.py test_training_logic.py
fi
if [[ "$1" == ray || "$1" == spark ]]; then
  # A local Ray instance, or Spark in local mode and as a standalone
  # cluster of three JVMs, each started and ended by the tests themselves.
  [ -n "${LD_PRELOAD:-}" ] && skip "the Ray and Spark jobs run in the optimized pass"
  # Their TensorFlow programs' kernels: built once, shared with the other suites.
  export PYTHONPATH="$ROOT/bindings/python" KOLO_TF_OPS_DIR="$KOLO_TEST_BUILD_CACHE/tf_ops"
  exec "${PYTEST[@]}" test_"$1"*.py
fi
if [[ "$1" == examples ]]; then
  exec "${PYTEST[@]}" test_examples.py
fi
if [[ "$1" == process_sets_4 ]]; then  # overlapping sets need 3+ ranks, Adasum a power of two
  exec "$KOLO_PYTHON" "$ROOT/tools/kolorun" -np 4 --timeout 280 "${PYTEST[@]}" multirank/test_process_sets.py
fi
if [[ "$1" == torch_programs_* ]]; then
  # Real programs (DDP with hooks, FSDP2, tensor parallelism, distributed
  # checkpoints) on kolo against gloo in one job, under torch's torchrun.
  [ -n "${LD_PRELOAD:-}" ] &&
    skip "the torch programs run in the optimized pass (torch under a sanitizer needs more than a preload)"
  ranks=${1#torch_programs_}
  export PYTHONPATH="$ROOT/bindings/python" KOLO_TIMEOUT_S=30
  # Inductor's compiled kernels (ddp_compiled) are built in the test's own
  # space; kolo's device backend (ddp_device_map) in the tests' shared one.
  export TORCHINDUCTOR_CACHE_DIR="$TEST_TMPDIR/inductor" TORCH_EXTENSIONS_DIR="$KOLO_TEST_BUILD_CACHE/torch_extensions"
  port=$(free_port)
  exec timeout 280 "$KOLO_VENV/bin/torchrun" --nproc_per_node "$ranks" --master_addr 127.0.0.1 \
    --master_port "$port" --redirects 2 --tee 3 "$ROOT/bindings/python/tests/torch_programs/programs.py"
fi
if [[ "$1" == jax ]]; then
  [ -n "${LD_PRELOAD:-}" ] && skip "the JAX tests run in the optimized pass"
  # kolo's XLA handlers: compiled once for all the tests; 2 ranks, then 3:
  # there only the process sets, which need a third rank (the extended set
  # runs every test on 3, as it does torch's and TensorFlow's on more ranks).
  export KOLO_JAX_OPS_DIR="$KOLO_TEST_BUILD_CACHE/jax_ffi" PYTHONPATH="$ROOT/bindings/python"
  "$KOLO_PYTHON" "$ROOT/tools/kolorun" -np 2 --timeout 280 "${PYTEST[@]}" jax || exit 1
  only_three=(-k test_process_sets)
  [ "${KOLO_TEST_EXTENDED:-0}" = 1 ] && only_three=()
  "$KOLO_PYTHON" "$ROOT/tools/kolorun" -np 3 --timeout 280 "${PYTEST[@]}" jax "${only_three[@]}" || exit 1
  exec "${PYTEST[@]}" test_jax_examples.py  # the seed examples' JAX twins (it starts their jobs)
fi
if [[ "$1" == tensorflow_* ]]; then
  [ -n "${LD_PRELOAD:-}" ] &&
    skip "the TensorFlow tests run in the optimized pass (TensorFlow under a sanitizer needs more than a preload)"
  # kolo's TensorFlow kernels: compiled once for all the tests.
  export KOLO_TF_OPS_DIR="$KOLO_TEST_BUILD_CACHE/tf_ops" PYTHONPATH="$ROOT/bindings/python" MPLCONFIGDIR="$TEST_TMPDIR/mpl"
  if [[ "$1" == tensorflow_examples ]]; then
    exec "${PYTEST[@]}" test_tensorflow_examples.py
  fi
  ranks=${1#tensorflow_}
  # One job per folder (each has a conftest of its own), Keras 3 on each
  # backend (on 4 ranks, its tensorflow backend: the torch one runs on 2),
  # and Keras 2 (tf_keras, which tf.keras is under TF_USE_LEGACY_KERAS=1).
  runs=("tensorflow tensorflow" "tensorflow keras" "tensorflow tf_keras")
  [[ "$ranks" == 2 ]] && runs+=("torch keras")
  for run in "${runs[@]}"; do
    read -r backend folder <<< "$run"
    legacy=()
    [[ "$folder" == tf_keras ]] && legacy=(TF_USE_LEGACY_KERAS=1)
    env "${legacy[@]}" KERAS_BACKEND="$backend" "$KOLO_PYTHON" "$ROOT/tools/kolorun" -np "$ranks" --timeout 280 \
      "${PYTEST[@]}" "$folder" || exit 1
  done
  [[ "$ranks" == 2 ]] || exit 0
  exec "${PYTEST[@]}" test_tensorflow_failures.py test_elastic_tensorflow.py test_dtype_policy.py
fi
if [[ "$1" == torch_* ]]; then
  ranks=${1#torch_}
  export PYTHONPATH="$ROOT/bindings/python"  # for ranks not started by kolorun
  cd torch_distributed || exit 1
  if [[ "$ranks" == 3 ]]; then
    "$KOLO_PYTHON" "$ROOT/tools/kolorun" -np 3 --timeout 280 "${PYTEST[@]}" . || exit 1
  else
    # torch's own torchrun; --redirects 2 --tee 2 send stderr through,
    # prefixed by rank. Its agent serves the store on a free port
    # (--standalone would take 29400).
    port=$(free_port)
    timeout 280 "$KOLO_VENV/bin/torchrun" --nproc_per_node "$ranks" --master_addr 127.0.0.1 \
      --master_port "$port" --redirects 2 --tee 2 --no_python "${PYTEST[@]}" . || exit 1
  fi
  [[ "$ranks" == 2 ]] || exit 0
  cd .. && exec "${PYTEST[@]}" test_torch_distributed.py test_torch_flight_record.py --deselect \
    test_torch_distributed.py::test_torchrun_restarts_meet_again_cleanly
fi
if [[ "$1" == elastic ]]; then
  # Whole elastic jobs (kolorun's driver, shrink_group, torchrun's
  # restarts): about three minutes, in the optimized pass.
  [ -n "${LD_PRELOAD:-}" ] && skip "the elastic jobs run in the optimized pass"
  export PYTHONPATH="$ROOT/bindings/python"
  # torch's shrink_group registers kolo's c10d Backend shim.
  export TORCH_EXTENSIONS_DIR="$KOLO_TEST_BUILD_CACHE/torch_extensions"
  # gloo's reconfiguration, the reference kolo's times are printed beside,
  # tests gloo, not kolo: run by hand (docs/testing.md).
  exec "${PYTEST[@]}" test_elastic.py test_torch_shrink.py \
    test_torch_distributed.py::test_torchrun_restarts_meet_again_cleanly \
    --deselect test_torch_shrink.py::test_gloo_reconfigures_by_forming_a_new_group
fi
if [[ "$1" == torchft ]]; then
  # torchft's lighthouse and two replica groups on kolo: about 45 s. The same
  # job on gloo, the reference, tests gloo: run by hand (docs/testing.md).
  [ -n "${LD_PRELOAD:-}" ] && skip "the torchft jobs run in the optimized pass"
  export PYTHONPATH="$ROOT/bindings/python"
  exec "${PYTEST[@]}" -s test_torchft.py -k "not gloo"
fi
exec "$KOLO_PYTHON" "$ROOT/tools/kolorun" -np "$1" --timeout 280 "${PYTEST[@]}" multirank
