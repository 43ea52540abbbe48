#!/usr/bin/env bash
# Installs kolo for programs that embed it:
#
#   tools/install.sh [--lib PATH] PREFIX
#
# puts under PREFIX
#   lib/libkolo.so.MAJOR.MINOR           the library, SONAME libkolo.so.MAJOR
#   lib/libkolo.so.MAJOR -> .MAJOR.MINOR what programs load at run time
#   lib/libkolo.so -> libkolo.so.MAJOR   what -lkolo links against
#   include/kolo/kolo.h                  #include <kolo/kolo.h>
#   lib/pkgconfig/kolo.pc                pkg-config --cflags --libs kolo
#   bin/kolorun                          the launcher
#   bin/kolo-doctor                      reads the ranks' flight records
#   lib/python3.X/dist-packages/kolo     the Python package, for $PYTHON
#                                        (default /usr/bin/python3)
# The version comes from bindings/c/version.bzl. The library is built with
# `bazel build $KOLO_BAZEL_CONFIG //bindings/c:libkolo.so` (e.g.
# KOLO_BAZEL_CONFIG=--config=cuda) unless --lib PATH (or KOLO_INSTALL_LIB)
# names one already built. DESTDIR=STAGE puts every file under STAGE, for
# packaging; kolo.pc still names PREFIX.
set -euo pipefail

die() { echo "install.sh: $*" >&2; exit 1; }
usage() { echo "usage: tools/install.sh [--lib PATH] PREFIX   (e.g. tools/install.sh /usr/local)" >&2; exit 2; }

# Not resolved through symlinks: a Bazel test runs this from its runfiles,
# which hold the files it needs in the checkout's layout.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LIB="${KOLO_INSTALL_LIB:-}"
PYTHON="${PYTHON:-/usr/bin/python3}"
while (($#)); do
  case "$1" in
    --lib) (($# >= 2)) || usage; LIB="$2"; shift 2 ;;
    --lib=*) LIB="${1#--lib=}"; shift ;;
    -h|--help) sed -n '2,/^set -e/{/^set -e/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) usage ;;
    *) break ;;
  esac
done
(($# == 1)) || usage
# Absolute, since kolo.pc records it (symlinks kept as given).
PREFIX="$(realpath -ms "$1")"
DEST="${DESTDIR:-}"

VERSION_FILE="$ROOT/bindings/c/version.bzl"
VERSION=$(sed -n 's/^KOLO_VERSION = "\([0-9]*\.[0-9]*\.[0-9]*\)"$/\1/p' "$VERSION_FILE")
[[ -n "$VERSION" ]] || die "no KOLO_VERSION = \"MAJOR.MINOR.PATCH\" line in $VERSION_FILE"
IFS=. read -r MAJOR MINOR _ <<< "$VERSION"
SONAME="libkolo.so.$MAJOR"

if [[ -z "$LIB" ]]; then
  # Word-split on purpose: KOLO_BAZEL_CONFIG may hold several flags.
  read -ra CONFIG <<< "${KOLO_BAZEL_CONFIG:-}"
  (cd "$ROOT" && bazel build "${CONFIG[@]}" //bindings/c:libkolo.so)
  # The configuration decides the output tree (--config=asan has its own).
  LIB="$(cd "$ROOT" && bazel info "${CONFIG[@]}" bazel-bin)/bindings/c/$SONAME"
fi
[[ -f "$LIB" ]] || die "no library at $LIB"
soname=$(readelf -d "$LIB" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p') || die "$LIB is not a shared library"
[[ "$soname" == "$SONAME" ]] ||
  die "$LIB has SONAME '${soname}', not $SONAME (bindings/c/version.bzl says $VERSION): not this checkout's build?"

# Debian's Python searches PREFIX/lib/python3.X/dist-packages for
# PREFIX=/usr/local; virtual environments and other interpreters use
# site-packages.
SITE=$("$PYTHON" -c 'import sys, sysconfig
debian = "deb_system" in sysconfig.get_scheme_names() and sys.prefix == sys.base_prefix
print("%s/lib/python%d.%d/%s" % (sys.argv[1], *sys.version_info[:2], "dist-packages" if debian else "site-packages"))
' "$PREFIX") ||
  die "cannot run $PYTHON (set PYTHON to the interpreter the package is for)"

install -d "$DEST$PREFIX/lib/pkgconfig" "$DEST$PREFIX/include/kolo" "$DEST$PREFIX/bin" "$DEST$SITE"

# install(1) replaces files by unlinking them first, so programs running
# from an earlier install keep their mapped copy.
install -m 0755 "$LIB" "$DEST$PREFIX/lib/libkolo.so.$MAJOR.$MINOR"
ln -sfn "libkolo.so.$MAJOR.$MINOR" "$DEST$PREFIX/lib/$SONAME"
ln -sfn "$SONAME" "$DEST$PREFIX/lib/libkolo.so"
install -m 0644 "$ROOT/bindings/c/kolo.h" "$DEST$PREFIX/include/kolo/kolo.h"

cat > "$DEST$PREFIX/lib/pkgconfig/kolo.pc" <<EOF
prefix=$PREFIX
exec_prefix=\${prefix}
libdir=\${exec_prefix}/lib
includedir=\${prefix}/include

Name: kolo
Description: Ring-allreduce communication engine (C API)
Version: $VERSION
Cflags: -I\${includedir}
Libs: -L\${libdir} -lkolo
EOF
chmod 0644 "$DEST$PREFIX/lib/pkgconfig/kolo.pc"

# kolorun names the interpreter it was installed for, as pip's scripts do.
{ echo "#!$PYTHON"; tail -n +2 "$ROOT/tools/kolorun"; } > "$DEST$PREFIX/bin/kolorun.tmp"
chmod 0755 "$DEST$PREFIX/bin/kolorun.tmp"
mv -f "$DEST$PREFIX/bin/kolorun.tmp" "$DEST$PREFIX/bin/kolorun"
install -m 0755 "$ROOT/tools/kolo-doctor" "$DEST$PREFIX/bin/kolo-doctor"

# The package afresh (no module of an earlier version left behind), with the
# C++ sources it compiles on first use (kolo.tensorflow's kernels, the torch
# device backend) and kolo.h for them, plus the version it cannot read from
# version.bzl once installed.
rm -rf "$DEST$SITE/kolo"
(cd "$ROOT/bindings/python" && find kolo -name '*.py' -o -name '*.cc' -o -name '*.h' -o -name '*.cpp') | while read -r f; do
  install -D -m 0644 "$ROOT/bindings/python/$f" "$DEST$SITE/$f"
done
install -D -m 0644 "$ROOT/bindings/c/kolo.h" "$DEST$SITE/kolo/include/kolo.h"
printf '# Written by tools/install.sh from bindings/c/version.bzl.\nversion = "%s"\n' "$VERSION" \
  > "$DEST$SITE/kolo/_version.py"

# Directories such as /usr/local/lib are searched through ld.so.cache:
# refresh it when installing into one of them for real.
in_cache_dirs() { grep -qsxF "$PREFIX/lib" /etc/ld.so.conf /etc/ld.so.conf.d/*.conf; }
if [[ -z "$DEST" && $(id -u) -eq 0 ]] && in_cache_dirs; then
  ldconfig
fi

echo "installed kolo $VERSION under ${DEST}$PREFIX:"
echo "  lib/libkolo.so.$MAJOR.$MINOR ($SONAME, libkolo.so), include/kolo/kolo.h, lib/pkgconfig/kolo.pc, bin/kolorun"
echo "  ${SITE#"$PREFIX"/}/kolo (Python package)"
# What finds each part by itself, and what needs telling.
in_cache_dirs ||
  echo "programs: link with -Wl,-rpath,$PREFIX/lib or run with LD_LIBRARY_PATH=$PREFIX/lib"
pc_path=$(pkg-config --variable=pc_path pkg-config 2>/dev/null || true)
[[ ":$pc_path:" == *":$PREFIX/lib/pkgconfig:"* ]] ||
  echo "pkg-config: PKG_CONFIG_PATH=$PREFIX/lib/pkgconfig"
"$PYTHON" -c 'import sys; sys.exit(sys.argv[1] not in sys.path)' "$SITE" ||
  echo "Python: PYTHONPATH=$SITE (the installed kolorun sets it for its ranks)"
