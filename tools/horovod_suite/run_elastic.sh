#!/usr/bin/env bash
# Runs Horovod's elastic integration tests (test/integration/test_elastic_torch.py
# over elastic_common.py, its training script data/elastic_torch_main.py)
# against kolo: horovod.torch is kolo.torch, and horovod.runner's launch
# entry points start kolorun's elastic driver (horovod/runner/ here):
#
#   tools/horovod_suite/run_elastic.sh HOROVOD_CHECKOUT [TEST_FILE] [PYTEST_ARGS...]
#
# HOROVOD_CHECKOUT is a checkout of horovod/horovod (its test/ and the pure
# Python parts of horovod/runner are used). TEST_FILE defaults to
# test/integration/test_elastic_torch.py; tools/horovod_suite/elastic_all.py
# also runs the tests Horovod skips there; test_elastic_tensorflow2.py and
# test_elastic_tensorflow_keras.py run the TensorFlow and Keras ones, whose
# scripts need HOROVOD_SUITE_KERAS2_LR=1 on Keras 3 (they set optimizer.lr,
# a name Keras 3 dropped; the stand-in then gives it back). Prints pytest's
# verdict per test.
set -euo pipefail
# shellcheck source=tools/horovod_suite/suite_env.sh
. "$(dirname "$0")/suite_env.sh"  # here, repo, checkout; the environment
file=${2:-test/integration/test_elastic_torch.py}
[[ "$file" = /* ]] || file="$checkout/$file"
shift $(($# < 2 ? $# : 2))
# Horovod's test utilities (test/utils) and integration helpers (elastic_common) too.
export PYTHONPATH=$PYTHONPATH:$checkout/test/utils:$checkout/test/integration
export KOLO_TIMEOUT_S=${KOLO_TIMEOUT_S:-10}  # a lost worker is noticed by its connections; a stuck one at this deadline
cd "$checkout/test/integration"
exec "$KOLO_PYTHON" -m pytest -v -p no:cacheprovider "$@" "$file"
