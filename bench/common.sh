# shellcheck shell=bash
# Sourced by the bench scripts (compare.sh, duel.sh, netns_compare.sh): they
# work from the repository root, on copies of the binaries they run, so that
# a build started meanwhile (another config, an edit) cannot change them
# mid-run.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

# build_and_copy NAME TARGET...: builds the targets (quietly, unless the
# build fails) and copies their binaries into WORK, a fresh folder removed
# on exit (a caller's own EXIT trap must remove it too).
build_and_copy() {
  local name=$1 target path
  shift
  bazel build "$@" >/dev/null 2>&1 || bazel build "$@"
  WORK="$(mktemp -d "${TMPDIR:-/tmp}/kolo-$name.XXXXXX")"
  trap 'rm -rf "$WORK"' EXIT
  for target in "$@"; do
    path=${target#//}
    cp "bazel-bin/${path/://}" "$WORK/"
  done
}
