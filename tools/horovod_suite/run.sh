#!/usr/bin/env bash
# Runs Horovod's own PyTorch tests against kolo.torch on N local ranks, the
# way Horovod's CI runs them under `horovodrun --gloo` (HOROVOD_RANK and
# friends set, so every test ends with barrier + shutdown):
#
#   tools/horovod_suite/run.sh HOROVOD_CHECKOUT N [TEST_FILE] [PYTEST_ARGS...]
#
# HOROVOD_CHECKOUT is a checkout of horovod/horovod (only its test/ and
# horovod/runner/ are used); TEST_FILE defaults to test/parallel/test_torch.py.
# Prints each rank's pytest summary, then the tests that passed on every
# rank, failed on any, or were skipped, from the ranks' JUnit reports.
# Runs in the project's Python environment (tools/setup.sh makes it, with
# the cloudpickle, mock and packaging Horovod's test utilities import).
# KOLO_TIMEOUT_S defaults to 20 here.
set -euo pipefail
# shellcheck source=tools/horovod_suite/suite_env.sh
. "$(dirname "$0")/suite_env.sh"  # here, repo, checkout; the environment
n=$2
file=${3:-test/parallel/test_torch.py}
shift $(($# < 3 ? $# : 3))
out=${HOROVOD_SUITE_OUT:-$(mktemp -d /tmp/horovod_suite.XXXXXX)}
mkdir -p "$out"

export KOLO_TIMEOUT_S=${KOLO_TIMEOUT_S:-20}  # a test whose ranks part ways fails in seconds, not minutes
cd "$checkout/$(dirname "$file")"
set +e
"$repo/tools/kolorun" -np "$n" bash -c '
  export HOROVOD_RANK=$KOLO_RANK HOROVOD_SIZE=$KOLO_WORLD_SIZE HOROVOD_LOCAL_RANK=$KOLO_LOCAL_RANK \
         HOROVOD_LOCAL_SIZE=$KOLO_LOCAL_WORLD_SIZE HOROVOD_CROSS_RANK=0 HOROVOD_CROSS_SIZE=1
  exec "$KOLO_PYTHON" -m pytest -q -p no:cacheprovider --junitxml='"$out"'/rank$KOLO_RANK.xml "$@" '"$(basename "$file")"' \
    > '"$out"'/rank$KOLO_RANK.log 2>&1' _ "$@"
status=$?
set -e
for log in "$out"/rank*.log; do echo "$(basename "$log"): $(tail -1 "$log")"; done
"$KOLO_PYTHON" "$here/summarize.py" "$n" "$out"/rank*.xml
exit $status
