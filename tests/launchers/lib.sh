# shellcheck shell=bash
# What the launcher tests share: the C worker, the Python script and the
# torch.distributed one, the
# environment that lets Python load this build's libkolo (with its sanitizer
# runtime preloaded into the uninstrumented interpreter, as
# bindings/python/python_test.sh does), and the check of each rank's line;
# on top of tests/lib/common.sh (failures, skips, free ports).
# shellcheck source=tests/lib/common.sh
. "$TEST_SRCDIR/$TEST_WORKSPACE/tests/lib/common.sh"
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
# The project's Python environment (torch 2.13, its torchrun, mpi4py).
# shellcheck source=tools/python_env.sh
. "$ROOT/tools/python_env.sh"
kolo_python_env_check || exit 1
WORKER="$ROOT/tests/launchers/launch_worker"
SCRIPT="$ROOT/tests/launchers/allreduce.py"
export KOLO_LIBRARY="$ROOT/bindings/c/libkolo.so"
export PYTHONPATH="$ROOT/bindings/python"
export PYTHONDONTWRITEBYTECODE=1
export KOLO_TIMEOUT_S=30
# The ranks' own sanitizer runtime, for Python ranks only: the launchers
# (torchrun, mpirun, srun) run as they are.
SAN_PRELOAD=""
case "$(library_sanitizer "$KOLO_LIBRARY")" in
  asan) SAN_PRELOAD="$(gcc -print-file-name=libasan.so)"
        export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" ;;
  tsan) SAN_PRELOAD="$(gcc -print-file-name=libtsan.so)" ;;
esac
# The command line of a Python rank.
PYRANK=(env "LD_PRELOAD=$SAN_PRELOAD" "$KOLO_PYTHON" "$SCRIPT")
# A torch.distributed rank on the kolo backend: in the optimized pass only
# (torch under a sanitizer needs more than a preload; the python_torch
# tests run the backend in every pass).
TORCH_RANK=()
[ -z "$SAN_PRELOAD" ] && TORCH_RANK=("$KOLO_PYTHON" "$ROOT/tests/launchers/torch_ddp.py")
# A kolo.tensorflow rank: likewise in the optimized pass only; kolo's
# TensorFlow kernels are compiled once for all the tests (tests/lib/common.sh).
TENSORFLOW_RANK=()
[ -z "$SAN_PRELOAD" ] && TENSORFLOW_RANK=(env "KOLO_TF_OPS_DIR=$KOLO_TEST_BUILD_CACHE/tf_ops" "$KOLO_PYTHON"
                                          "$ROOT/tests/launchers/tensorflow_job.py")
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/launch.XXXXXX")"
# Whether this is tools/test.sh --extended: the jobs that only repeat a
# launcher's default ones at more ranks or with another framework run then.
extended() { [ "${KOLO_TEST_EXTENDED:-0}" = 1 ]; }

# expect_ranks LABEL N PATTERN FILE: every rank r < N printed PATTERN with r
# in place of %r (e.g. "rank %r ok"), else a failure showing FILE's end.
expect_ranks() {
  local label=$1 n=$2 pattern=$3 file=$4 r missing=""
  for ((r = 0; r < n; r++)); do
    grep -q "${pattern//%r/$r}" "$file" || missing+=" $r"
  done
  if [ -z "$missing" ]; then
    echo "ok: $label: all $n ranks checked their results"
  else
    fail "$label: rank(s)$missing did not report '$pattern'"
    tail -40 "$file"
  fi
}

# run_job LABEL N PATTERN LIMIT_S COMMAND...: runs a whole job, its output in
# $WORK/LABEL.out, and checks every rank's line.
run_job() {
  local label=$1 n=$2 pattern=$3 limit=$4 start rc
  shift 4
  start=$(date +%s.%N)
  timeout "$limit" "$@" >"$WORK/$label.out" 2>&1
  rc=$?
  echo "$label: exit $rc in $(seconds_since "$start" 1)s"
  if [ "$rc" != 0 ]; then
    fail "$label: exit status $rc"
    tail -30 "$WORK/$label.out"
  fi
  expect_ranks "$label" "$n" "$pattern" "$WORK/$label.out"
}

# lightning_on LABEL N LAUNCH...: PyTorch Lightning's Trainer on N ranks
# started by LAUNCH (which ends where the program goes), on kolo and then on
# gloo, each rank checked; both must end with the same weights.
lightning_on() {
  local label=$1 n=$2 backend
  shift 2
  for backend in kolo gloo; do
    run_job "$label-$backend" "$n" "lightning rank %r of $n on $backend ok" 240 "$@" "$KOLO_PYTHON" \
      "$ROOT/tests/launchers/lightning_train.py" "$backend" "$n" "$WORK/$label-$backend.pt"
  done
  if "$KOLO_PYTHON" -c 'import sys, torch
a, b = (torch.load(p) for p in sys.argv[1:])
torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)' "$WORK/$label-kolo.pt" "$WORK/$label-gloo.pt"; then
    echo "ok: $label: kolo's weights equal gloo's"
  else
    fail "$label: kolo's weights differ from gloo's"
  fi
}
