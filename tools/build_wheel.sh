#!/usr/bin/env bash
# Builds a wheel of kolo with libkolo inside, for `pip install`:
#
#   tools/build_wheel.sh [OUTDIR]        # default dist/
#   pip install dist/kolo-*.whl          # then: kolorun -np 4 python train.py
#
# The wheel (py3-none-<platform>) holds the kolo package with
# kolo/libkolo.so.MAJOR (found without KOLO_LIBRARY), the kolorun command,
# and the "torch.backends" entry point that registers the torch.distributed
# backend "kolo" when torch is imported. The library is built with
# `bazel build $KOLO_BAZEL_CONFIG //bindings/c:libkolo.so` (e.g.
# KOLO_BAZEL_CONFIG=--config=cuda for GPU buffers) unless KOLO_WHEEL_LIBRARY
# names one already built. Runs in the project's Python environment
# (tools/setup.sh), whose setuptools builds the wheel offline.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/dist}")"
# shellcheck source=tools/python_env.sh
. "$ROOT/tools/python_env.sh"
kolo_python_env_check || exit 1
VERSION=$(sed -n 's/^KOLO_VERSION = "\([0-9]*\.[0-9]*\.[0-9]*\)"$/\1/p' "$ROOT/bindings/c/version.bzl")
LIB="${KOLO_WHEEL_LIBRARY:-}"
if [[ -z "$LIB" ]]; then
  read -ra CONFIG <<< "${KOLO_BAZEL_CONFIG:-}"
  (cd "$ROOT" && bazel build -c opt "${CONFIG[@]}" //bindings/c:libkolo.so)
  LIB="$(cd "$ROOT" && bazel info -c opt "${CONFIG[@]}" bazel-bin)/bindings/c/libkolo.so.${VERSION%%.*}"
fi
if readelf -d "$LIB" | grep -q 'NEEDED.*lib[at]san'; then
  echo "build_wheel.sh: $LIB is a sanitizer build; a wheel needs a plain one" >&2
  exit 2
fi
mkdir -p "$OUT"
KOLO_WHEEL_LIBRARY="$LIB" "$KOLO_PYTHON" -m pip wheel --no-build-isolation --no-deps --no-input -q \
  -w "$OUT" "$ROOT/bindings/python" 2>&1 | grep -v "is ignored: it is neither a file nor a directory" || true
wheel="$OUT/kolo-$VERSION-py3-none-$("$KOLO_PYTHON" -c 'import sysconfig; print(sysconfig.get_platform().replace("-", "_").replace(".", "_"))').whl"
[[ -f "$wheel" ]] || { echo "build_wheel.sh: pip made no $wheel" >&2; exit 1; }
echo "$wheel"
