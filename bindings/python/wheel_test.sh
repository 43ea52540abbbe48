#!/usr/bin/env bash
# The wheel as a user meets it: tools/build_wheel.sh makes it from this
# build's libkolo; it goes with `pip install` into a fresh virtual
# environment that has torch (the project environment's packages, through
# a .pth file) and nothing of kolo's; then, with no PYTHONPATH and no
# KOLO_LIBRARY, `kolorun -np 4` runs kolo.torch, a DDP script that never
# imports kolo runs on backend "kolo" under kolorun and under torchrun, and
# kolo.tensorflow builds (or finds built) its kernels from the installed
# package.
set -uo pipefail
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
# shellcheck source=tests/lib/common.sh
. "$ROOT/tests/lib/common.sh"  # fail, skip, finish, free_port, library_sanitizer
# shellcheck source=tools/python_env.sh
. "$ROOT/tools/python_env.sh"
kolo_python_env_check || exit 1
LIB="$ROOT/bindings/c/libkolo.so"
[ -n "$(library_sanitizer "$LIB")" ] &&
  skip "the wheel is built from the optimized pass's library (this is a sanitizer build)"
WORK="$(mktemp -d "${TEST_TMPDIR:-/tmp}/wheel.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

wheel=$(KOLO_WHEEL_LIBRARY="$LIB" bash "$ROOT/tools/build_wheel.sh" "$WORK/dist") || { echo "FAIL: no wheel"; exit 1; }
echo "wheel: $(basename "$wheel"), $(stat -c %s "$wheel") bytes"
[[ "$(basename "$wheel")" == kolo-*-py3-none-linux_*.whl ]] || fail "the wheel's tag is not py3-none-<platform>"
contents=$("$KOLO_PYTHON" -m zipfile -l "$wheel")
for f in kolo/libkolo.so. kolo/torch/distributed/process_group.py _kolo_torch_backend.py /scripts/kolorun /scripts/kolo-doctor \
  kolo/runner/elastic_driver.py kolo/torch/elastic.py entry_points.txt \
  kolo/tensorflow/_ops_kernels.cc kolo/tensorflow/_ops_common.h kolo/include/kolo.h; do
  grep -q "$f" <<< "$contents" || fail "the wheel has no $f"
done

# A fresh environment: torch and NumPy from the project's, kolo from nowhere.
env="$WORK/env"
/usr/bin/python3 -m venv "$env" || exit 1
site=$("$KOLO_PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$site" > "$env/lib/python3.11/site-packages/project_packages.pth"
"$env/bin/python" -c 'import kolo' 2>/dev/null && fail "kolo importable before the wheel is installed"
PIP_DISABLE_PIP_VERSION_CHECK=1 "$env/bin/python" -m pip install -q --no-deps --no-index "$wheel" 2>&1 |
  grep -v "is ignored: it is neither" || true
lib=$(ls "$env"/lib/python3.11/site-packages/kolo/libkolo.so.* 2>/dev/null)
[ -n "$lib" ] || fail "pip installed no kolo/libkolo.so.*"
ldd "$lib" | grep -q "not found" && fail "the installed library misses: $(ldd "$lib" | grep 'not found')"
# What a fresh Debian machine has: the C and C++ runtimes (OpenSSL's
# libcrypto is linked in; RDMA's libibverbs is opened only when RDMA is
# used).
extra=$(ldd "$lib" | awk '{print $1}' | grep -vE '^(linux-vdso\.so|/lib64/ld-linux-x86-64\.so|lib(c|m|stdc\+\+|gcc_s|dl|pthread|rt)\.so)')
# ... and nothing of OpenSSL is looked up at run time: TensorFlow's BoringSSL,
# loaded first, would answer under the same names.
nm -D --undefined-only "$lib" | grep -qE ' (EVP_|HMAC|CRYPTO_)' && fail "the library takes OpenSSL's symbols from the process"
[ -z "$extra" ] || fail "the installed library needs more than a fresh Debian machine has: $extra"
echo "links against: $(ldd "$lib" | awk '{print $1}' | tr '\n' ' ')"

cd "$WORK" || exit 1
run() {  # NAME EXPECTED_COUNT PATTERN COMMAND...: COMMAND prints PATTERN EXPECTED_COUNT times
  local name=$1 want=$2 pattern=$3 got
  shift 3
  timeout 120 env -u PYTHONPATH -u KOLO_LIBRARY -u PYTHONHOME KOLO_TIMEOUT_S=60 "$@" > "$name.out" 2>&1
  # Occurrences, not lines: ranks sharing a pipe may run their lines together.
  got=$(grep -o "$pattern" "$name.out" | wc -l)
  if [ "$got" -eq "$want" ]; then
    echo "ok: $name"
  else
    fail "$name: $got of $want lines '$pattern'"
    tail -30 "$name.out"
  fi
}
run horovod-api 4 "sum 6.0 from .*site-packages/kolo/libkolo.so" "$env/bin/kolorun" -np 4 "$env/bin/python" -c '
import sys, torch, kolo, kolo.torch as hvd
hvd.init()
t = hvd.allreduce(torch.tensor([float(hvd.rank())]), op=hvd.Sum)
sys.stdout.write("sum %s from %s\n" % (t.item(), kolo._library.lib._name))'
script="$ROOT/bindings/python/tests/scripts/ddp_without_kolo_import.py"
run ddp-kolorun 4 "ddp on kolo ok" "$env/bin/kolorun" -np 4 "$env/bin/python" "$script"
run ddp-torchrun 2 "ddp on kolo ok" "$env/bin/python" -m torch.distributed.run --nproc_per_node 2 \
  --master_addr 127.0.0.1 --master_port "$(free_port)" "$script"
# kolo.tensorflow builds its kernels against the installed kolo/include/kolo.h,
# into the tests' shared cache: the library is named by a hash of every file
# the compile reads (found where the compile looks: the installed package)
# and of the flags, so the wheel's and the tree's are one build, made once
# by whichever suite comes first (about 50 CPU-seconds), not once each.
run tensorflow 2 "tf sum 1.0 ok" env KOLO_TF_OPS_DIR="$KOLO_TEST_BUILD_CACHE/tf_ops" "$env/bin/kolorun" -np 2 "$env/bin/python" -c '
import tensorflow as tf, kolo.tensorflow as hvd
hvd.init()
print("tf sum", float(hvd.allreduce(tf.constant([float(hvd.rank())]), op=hvd.Sum)[0]), "ok")'
finish wheel_test
