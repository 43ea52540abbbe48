#!/usr/bin/env bash
# tools/install.sh as an embedder meets it: this build's libkolo.so installed
# into a fresh prefix, then, outside the repository, a C program built with
# nothing but pkg-config's flags runs on 4 ranks under the installed kolorun,
# and the installed Python package imports (no KOLO_LIBRARY, no PYTHONPATH
# from us) and allreduces on 2 ranks. Where pip is installed, `pip install
# --prefix` of bindings/python too, offline.
# The C program finds the library through LD_LIBRARY_PATH=$PREFIX/lib (kolo.pc
# adds no rpath, as for any library outside the loader's directories).
set -euo pipefail
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
# shellcheck source=tests/lib/common.sh
. "$ROOT/tests/lib/common.sh"  # library_sanitizer
LIB="$ROOT/bindings/c/libkolo.so"
rm -rf "$TEST_TMPDIR/install_test" && mkdir -p "$TEST_TMPDIR/install_test"
# Resolved, so that paths compare equal to what Python and kolo.pc report.
WORK=$(realpath "$TEST_TMPDIR/install_test")
PREFIX="$WORK/prefix"
cd "$WORK"
unset KOLO_LIBRARY PYTHONPATH
export KOLO_TIMEOUT_S=60 PYTHONDONTWRITEBYTECODE=1

fail() { echo "FAIL: $*" >&2; exit 1; }
show_fail() { cat "$1" >&2; fail "$2"; }

VERSION=$(sed -n 's/^KOLO_VERSION = "\(.*\)"$/\1/p' "$ROOT/bindings/c/version.bzl")
IFS=. read -r MAJOR MINOR _ <<< "$VERSION"
[[ -n "$MAJOR" && -n "$MINOR" ]] || fail "no version in bindings/c/version.bzl"

# A sanitizer build of libkolo needs its runtime in the process: the C
# program is built with the same sanitizer (as engine_c_test.sh does), the
# uninstrumented interpreter gets it preloaded (as python_test.sh does).
SAN_CFLAGS=()
PY_ENV=()
sanitizer=$(library_sanitizer "$LIB")
if [ "$sanitizer" = asan ]; then
  SAN_CFLAGS=(-fsanitize=address,undefined)
  # The interpreter and numpy keep memory until exit by design.
  PY_ENV=(LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0")
elif [ "$sanitizer" = tsan ]; then
  SAN_CFLAGS=(-fsanitize=thread)
  PY_ENV=(LD_PRELOAD="$(gcc -print-file-name=libtsan.so)")
fi
py() { env "${PY_ENV[@]}" "$@"; }

# --- install, from the prebuilt library (no Bazel inside a Bazel test) ---
bash "$ROOT/tools/install.sh" --lib "$LIB" "$PREFIX" > install.out 2>&1 || show_fail install.out "tools/install.sh failed"
real="$PREFIX/lib/libkolo.so.$MAJOR.$MINOR"
[[ -f "$real" && ! -L "$real" ]] || fail "no $real"
[[ $(readlink "$PREFIX/lib/libkolo.so.$MAJOR") == "libkolo.so.$MAJOR.$MINOR" ]] || fail "libkolo.so.$MAJOR does not link to libkolo.so.$MAJOR.$MINOR"
[[ $(readlink "$PREFIX/lib/libkolo.so") == "libkolo.so.$MAJOR" ]] || fail "libkolo.so does not link to libkolo.so.$MAJOR"
soname=$(readelf -d "$real" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ "$soname" == "libkolo.so.$MAJOR" ]] || fail "SONAME is '$soname', want libkolo.so.$MAJOR"
cmp -s "$ROOT/bindings/c/kolo.h" "$PREFIX/include/kolo/kolo.h" || fail "include/kolo/kolo.h is not bindings/c/kolo.h"
[[ -x "$PREFIX/bin/kolorun" ]] || fail "no bin/kolorun"
[[ -x "$PREFIX/bin/kolo-doctor" ]] || fail "no bin/kolo-doctor"
SITE="$PREFIX/lib/python$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')/dist-packages"
[[ -f "$SITE/kolo/__init__.py" && -f "$SITE/kolo/torch/__init__.py" ]] || fail "no Python package in $SITE"
[[ -f "$SITE/kolo/tensorflow/_ops_kernels.cc" && -f "$SITE/kolo/tensorflow/_ops_common.h" && -f "$SITE/kolo/include/kolo.h" ]] ||
  fail "no kolo/tensorflow/_ops_*.cc, _ops_common.h or kolo/include/kolo.h in $SITE (kolo.tensorflow compiles them on first use)"

export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
[[ $(pkg-config --modversion kolo) == "$VERSION" ]] || fail "kolo.pc says version $(pkg-config --modversion kolo), want $VERSION"
[[ $(pkg-config --variable=prefix kolo) == "$PREFIX" ]] || fail "kolo.pc's prefix is not $PREFIX"
echo "installed: $(cd "$PREFIX" && find . -path '*-packages/kolo' -prune -print -o \( -type f -o -type l \) -print | sort | tr '\n' ' ')"

# --- a C program that knows kolo only through the install ---
cat > prog.c <<'EOF'
#include <kolo/kolo.h>
#include <stdio.h>
#include <string.h>

#define N 100003 /* 800 KB: the ring, not recursive doubling; not a multiple of the world size */
static double buf[N];

static int failed(const char* what, kolo_result_t r) {
  fprintf(stderr, "%s: %s (%s)\n", what, kolo_result_string(r), kolo_last_error());
  return 1;
}

int main(void) {
  int major = -1, minor = -1, patch = -1, rank = -1, size = -1;
  kolo_result_t r = kolo_get_version(&major, &minor, &patch);
  if (r != KOLO_SUCCESS) return failed("kolo_get_version", r);
  r = kolo_get_version(&major, NULL, &patch);
  if (r != KOLO_ERR_INVALID_ARGUMENT || !strstr(kolo_last_error(), "minor")) {
    fprintf(stderr, "kolo_get_version with a NULL minor returned %d (%s)\n", r, kolo_last_error());
    return 1;
  }
  kolo_comm_t comm;
  if ((r = kolo_comm_init_from_env(&comm)) != KOLO_SUCCESS) return failed("kolo_comm_init_from_env", r);
  kolo_comm_rank(comm, &rank);
  kolo_comm_size(comm, &size);
  for (int i = 0; i < N; i++) buf[i] = (double)(i % 101) * (rank + 1);
  if ((r = kolo_allreduce(comm, buf, buf, N, KOLO_FLOAT64, KOLO_SUM)) != KOLO_SUCCESS) return failed("kolo_allreduce", r);
  for (int i = 0; i < N; i++) {
    /* sum over ranks r of (i mod 101)(r + 1); small integers, exact in doubles */
    double want = (double)(i % 101) * size * (size + 1) / 2;
    if (buf[i] != want) {
      fprintf(stderr, "rank %d: element %d is %.17g, want %.17g\n", rank, i, buf[i], want);
      return 1;
    }
  }
  kolo_comm_destroy(comm);
  printf("rank %d of %d: allreduce ok, libkolo %d.%d.%d\n", rank, size, major, minor, patch);
  return 0;
}
EOF
# shellcheck disable=SC2046  # pkg-config's flags are meant to split
cc -std=c11 -Wall -Werror "${SAN_CFLAGS[@]}" prog.c -o prog $(pkg-config --cflags --libs kolo) > cc.out 2>&1 ||
  show_fail cc.out "prog.c does not build with pkg-config's flags"
readelf -d prog | grep NEEDED | grep -qF "[libkolo.so.$MAJOR]" || fail "prog does not record libkolo.so.$MAJOR"
LD_LIBRARY_PATH="$PREFIX/lib" timeout 120 "$PREFIX/bin/kolorun" -np 4 ./prog > c.out 2>&1 || show_fail c.out "the C program failed on 4 ranks"
for r in 0 1 2 3; do
  grep -qx "\[$r\] rank $r of 4: allreduce ok, libkolo $VERSION" c.out || show_fail c.out "rank $r of the C program"
done
echo "C program: 4 ranks ok (LD_LIBRARY_PATH=$PREFIX/lib)"

# --- the installed Python package ---
cat > allreduce.py <<'EOF'
import numpy as np
import kolo
kolo.init()
r, n = kolo.rank(), kolo.size()
got = kolo.allreduce(np.arange(1000, dtype=np.float64) * (r + 1), op=kolo.Sum)
want = np.arange(1000, dtype=np.float64) * (n * (n + 1) // 2)
assert np.array_equal(got, want), (got[:4], want[:4])
print("rank %d python allreduce ok, kolo %s, %s, %s" % (r, kolo.__version__, kolo.__file__, kolo._library.lib._name))
kolo.shutdown()
EOF
py PYTHONPATH="$SITE" /usr/bin/python3 -c 'import kolo; print(kolo.__version__, kolo.__file__, kolo._library.lib._name)' \
  > import.out 2>&1 || show_fail import.out "the installed package does not import"
[[ $(cat import.out) == "$VERSION $SITE/kolo/__init__.py $PREFIX/lib/libkolo.so.$MAJOR" ]] ||
  show_fail import.out "import kolo: want '$VERSION $SITE/kolo/__init__.py $PREFIX/lib/libkolo.so.$MAJOR'"
# No PYTHONPATH: the installed kolorun gives its ranks the package beside it.
py timeout 120 "$PREFIX/bin/kolorun" -np 2 /usr/bin/python3 allreduce.py > py.out 2>&1 ||
  show_fail py.out "the Python allreduce failed under the installed kolorun"
for r in 0 1; do
  grep -qxF "[$r] rank $r python allreduce ok, kolo $VERSION, $SITE/kolo/__init__.py, $PREFIX/lib/libkolo.so.$MAJOR" py.out ||
    show_fail py.out "rank $r of the Python job"
done
echo "Python: kolo $VERSION imports from $SITE, 2 ranks ok"

# --- pip install --prefix, offline ---
if ! /usr/bin/python3 -m pip --version > /dev/null 2>&1; then
  echo "install_test: ok (pip check skipped: /usr/bin/python3 has no pip; tools/setup.sh installs python3-pip)"
  exit 0
fi
# setup.py reads ../c/version.bzl, ../c/kolo.h, ../../tools/kolorun and kolo-doctor: a
# copy in the checkout's layout, outside the (read-only) runfiles.
mkdir -p src/bindings/python src/bindings/c src/tools
cp -rL "$ROOT/bindings/python/setup.py" "$ROOT/bindings/python/pyproject.toml" "$ROOT/bindings/python/kolo" src/bindings/python/
cp -L "$ROOT/bindings/c/version.bzl" "$ROOT/bindings/c/kolo.h" src/bindings/c/
cp -L "$ROOT/tools/kolorun" "$ROOT/tools/kolo-doctor" src/tools/
/usr/bin/python3 -m pip install --no-build-isolation --no-deps --no-index --no-cache-dir --root-user-action=ignore \
  --prefix "$WORK/pip" ./src/bindings/python > pip.out 2>&1 || show_fail pip.out "pip install --prefix failed"
pip_init=$(find "$WORK/pip" -path '*-packages/kolo/__init__.py')
pip_site=$(dirname "$(dirname "$pip_init")")
pip_kolorun=$(find "$WORK/pip" -path '*/bin/kolorun')
[[ -n "$pip_init" && -f "$pip_site/kolo/_version.py" && -x "$pip_kolorun" ]] || fail "pip installed no package with _version.py, or no kolorun: $(find "$WORK/pip")"
# pip installs no libkolo: the package finds the one installed above through
# the system loader.
py PYTHONPATH="$pip_site" LD_LIBRARY_PATH="$PREFIX/lib" /usr/bin/python3 -c 'import kolo; print(kolo.__version__)' \
  > pip_import.out 2>&1 || show_fail pip_import.out "the pip-installed package does not import"
[[ $(cat pip_import.out) == "$VERSION" ]] || show_fail pip_import.out "pip-installed kolo.__version__ is not $VERSION"
py LD_LIBRARY_PATH="$PREFIX/lib" timeout 120 "$pip_kolorun" -np 2 /usr/bin/python3 allreduce.py > pip_py.out 2>&1 ||
  show_fail pip_py.out "the Python allreduce failed under pip's kolorun"
[[ $(grep -c "python allreduce ok, kolo $VERSION, $pip_site/kolo/__init__.py, libkolo.so.$MAJOR\$" pip_py.out) == 2 ]] ||
  show_fail pip_py.out "pip's kolorun: not both ranks ok"
echo "pip: installed into ${pip_site#"$WORK"/}, kolorun on 2 ranks ok"
echo "install_test: ok"
