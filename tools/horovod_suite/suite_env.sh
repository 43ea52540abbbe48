# Sourced by this folder's scripts with the Horovod checkout's path as $1:
# the project's Python environment (tools/setup.sh), `horovod` resolved to
# this folder's stand-in package and kolo, and Horovod's own tree behind it.
# Sets here, repo and checkout; exports HOROVOD_CHECKOUT, PYTHONPATH,
# KOLO_PYTHON and KOLO_LIBRARY.
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
# shellcheck source=tools/python_env.sh
. "$repo/tools/python_env.sh"
kolo_python_env_check || exit 2
export KOLO_PYTHON
checkout=$(cd "$1" && pwd)
export HOROVOD_CHECKOUT=$checkout
export PYTHONPATH=$here:$repo/bindings/python${PYTHONPATH:+:$PYTHONPATH}
export KOLO_LIBRARY=${KOLO_LIBRARY:-$repo/bazel-bin/bindings/c/libkolo.so}
