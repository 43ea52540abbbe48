#!/usr/bin/env bash
# Runs one of Horovod's single-process suites against kolo: its launcher,
# Ray and Spark tests (test/single/test_ray.py, test_ray_elastic.py,
# test_run.py, test/integration/test_static_run.py, test_spark.py), with
# horovod.torch and horovod.ray resolved to kolo's and the -p own_controller
# and -p ray_removed_arguments plugins (why: their files), then prints the verdict per test with
# not_applicable.py's reasons:
#
#   tools/horovod_suite/run_single.sh HOROVOD_CHECKOUT TEST_FILE [PYTEST_ARGS...]
set -euo pipefail
# shellcheck source=tools/horovod_suite/suite_env.sh
. "$(dirname "$0")/suite_env.sh"  # here, repo, checkout; the environment
file=$2
shift 2
out=${HOROVOD_SUITE_OUT:-$(mktemp -d /tmp/horovod_suite.XXXXXX)}
mkdir -p "$out"
export PYTHONPATH=$PYTHONPATH:$checkout/test/utils:$checkout/$(dirname "$file")
export KOLO_TIMEOUT_S=${KOLO_TIMEOUT_S:-30}
export PYSPARK_PYTHON=$KOLO_PYTHON  # Spark's Python workers: the project's environment, with torch and kolo's needs
cd "$checkout/$(dirname "$file")"
set +e
"$KOLO_PYTHON" -m pytest -v -p no:cacheprovider -p own_controller -p ray_removed_arguments --junitxml="$out/report.xml" "$@" \
  "$(basename "$file")" > "$out/pytest.log" 2>&1
status=$?
set -e
tail -1 "$out/pytest.log"
"$KOLO_PYTHON" "$here/summarize.py" 1 "$out/report.xml"
exit $status
