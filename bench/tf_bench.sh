#!/usr/bin/env bash
# Training steps of a 25.2M-parameter MLP on kolo.tensorflow / kolo.keras
# against TensorFlow's MultiWorkerMirroredStrategy, N = 2 and 4 local
# ranks, a batch where communication dominates and one where compute does
# (bench/tf_bench.py says what each job times):
#   bash bench/tf_bench.sh [ROUNDS] [-- tf_bench.py options]
# Each round runs, one job after the other: kolo model.fit, kolo's
# GradientTape loop, MWMS's strategy.run loop, and kolo model.fit on Keras's
# torch backend; the rounds alternate so the machine's noise falls on every
# framework alike. Prints the medians (ms per step), the same steps without
# communication in kolo's job, the communication share ((step - that) /
# step) and kolo's speed against MWMS's. The raw lines stay in
# TF_BENCH_RESULTS when it names a file.
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rounds=${1:-3}
[ $# -gt 0 ] && shift
[ "${1:-}" = -- ] && shift
build_and_copy tf //bindings/c:libkolo.so
# shellcheck source=tools/python_env.sh
. tools/python_env.sh
kolo_python_env_check || exit 1
export KOLO_LIBRARY="$WORK/libkolo.so" KOLO_TF_OPS_DIR="$WORK/tf_ops" TF_CPP_MIN_LOG_LEVEL=2
results="${TF_BENCH_RESULTS:-$WORK/results}"
job() {  # job BACKEND RANKS ARGS...
  local backend=$1 n=$2
  shift 2
  KERAS_BACKEND=$backend "$KOLO_PYTHON" tools/kolorun -np "$n" --timeout 900 --no-prefix "$KOLO_PYTHON" \
    bench/tf_bench.py "$@" 2>/dev/null | grep '^RESULT' >> "$results" ||
    echo "tf_bench: a job failed: KERAS_BACKEND=$backend -np $n $*" >&2
}
for n in 2 4; do
  for batch in 1 64; do
    for _ in $(seq "$rounds"); do
      job tensorflow "$n" --framework kolo --style fit --batch "$batch" "$@"
      job tensorflow "$n" --framework kolo --style loop --batch "$batch" "$@"
      job tensorflow "$n" --framework mwms --style loop --batch "$batch" "$@"
      job torch "$n" --framework kolo --style fit --batch "$batch" "$@"
    done
  done
done
"$KOLO_PYTHON" - "$results" <<'PY'
import collections, re, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = dict(re.findall(r"(\w+)=(\S+)", line))
    runs[(int(f["ranks"]), int(f["batch"]), f["framework"], f["style"], f["backend"])].append(
        (float(f["ms"]), float(f["compute_ms"])))
def med(key, i=0):
    values = [v[i] for v in runs.get(key, [])]
    return statistics.median(values) if values else float("nan")
def cell(key):
    ms, compute = med(key), med(key, 1)
    return "%.1f (%.1f, %.0f%%)" % (ms, compute, 100 * (ms - compute) / ms) if compute == compute else "%.1f" % ms
print("| batch/rank | N | kolo fit | kolo loop | MWMS loop | kolo loop / MWMS | kolo fit, Keras on torch |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for n in sorted({k[0] for k in runs}):
    for b in sorted({k[1] for k in runs}):
        loop, mwms = med((n, b, "kolo", "loop", "tensorflow")), med((n, b, "mwms", "loop", "tensorflow"))
        print("| %d | %d | %s | %s | %s | %.2fx | %s |" % (
            b, n, cell((n, b, "kolo", "fit", "tensorflow")), cell((n, b, "kolo", "loop", "tensorflow")),
            cell((n, b, "mwms", "loop", "tensorflow")), mwms / loop, cell((n, b, "kolo", "fit", "torch"))))
print("(ms per step, median of the rounds; in parentheses the same steps without communication in the same job,")
print(" and the communication share (step - that) / step: ranks computing at once on shared cores can make it")
print(" negative where compute dominates)")
PY
