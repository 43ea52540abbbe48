#!/usr/bin/env bash
# Builds the libFuzzer targets in tests/fuzz/ with clang (ASan + UBSan) and
# runs each for a bounded time on a scratch copy of its corpus, so the repo's
# corpus (tests/fuzz/corpus/) stays the reviewed seed set. Each target's
# sources are the ones Bazel builds it from (tests/fuzz/BUILD.bazel).
#   tools/fuzz.sh [SECONDS_PER_TARGET]   (default 20)
# Prints the executions each target ran; exits non-zero on any crash.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SECONDS_PER_TARGET="${1:-20}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/kolo-fuzz.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
CXX="${CXX_FUZZ:-clang++}"
FLAGS=(-std=c++17 -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -I.)
LINK_FLAGS=(-fsanitize=fuzzer,address,undefined -pthread -ldl -lcrypto)
TARGETS=(store_request handshake frame torch_reply hostlist op_request rank_facts failure_record)

# in_parallel FUNCTION ARG...: FUNCTION ARG for each ARG, as many at once as
# there are cores; non-zero if any failed.
in_parallel() {
  local fn=$1 status=0 running=0 arg
  shift
  for arg in "$@"; do
    if ((running >= $(nproc))); then
      wait -n || status=1
      running=$((running - 1))
    fi
    "$fn" "$arg" &
    running=$((running + 1))
  done
  while ((running > 0)); do
    wait -n || status=1
    running=$((running - 1))
  done
  return $status
}

# Each target's sources as Bazel has them: its own file and every .cc file
# of the project below it, as paths.
declare -A SOURCES=()
for target in "${TARGETS[@]}"; do
  SOURCES[$target]=$(bazel query --noshow_progress "kind('source file', deps(//tests/fuzz:${target}_fuzz))" 2>/dev/null |
    sed -n 's#^//\([^:]*\):\(.*\.cc\)$#\1/\2#p' | sed 's#^/##' | sort | tr '\n' ' ')
  if [[ "${SOURCES[$target]}" != *"tests/fuzz/${target}_fuzz.cc"* ]]; then
    echo "fuzz $target: bazel query gave no sources for //tests/fuzz:${target}_fuzz"
    exit 1
  fi
done

# Every source compiled once (the targets share most of them), instrumented
# for the fuzzer; each target then links its own.
object_of() { echo "$WORK/obj/${1//\//_}.o"; }
compile_one() {
  local object
  object=$(object_of "$1")
  "$CXX" "${FLAGS[@]}" -c "$1" -o "$object" >"$object.log" 2>&1 || { echo "fuzz: $1 did not build:"; cat "$object.log"; return 1; }
}
mkdir -p "$WORK/obj"
# shellcheck disable=SC2046,SC2086
if ! in_parallel compile_one $(printf '%s\n' ${SOURCES[@]} | sort -u); then
  echo "fuzz: CRASH (a source did not build)"
  exit 1
fi

# fuzz_one TARGET: links and runs one target; its report in $WORK/TARGET.report,
# exit status non-zero on a crash.
fuzz_one() {
  local target=$1 report="$WORK/$1.report" objects=() source
  for source in ${SOURCES[$target]}; do objects+=("$(object_of "$source")"); done
  if ! "$CXX" "${objects[@]}" "${LINK_FLAGS[@]}" -o "$WORK/$target" >"$report" 2>&1; then
    echo "fuzz $target: CRASH (did not link)" >>"$report"
    return 1
  fi
  mkdir -p "$WORK/corpus-$target"
  cp tests/fuzz/corpus/"$target"/* "$WORK/corpus-$target/"
  if "$WORK/$target" -max_total_time="$SECONDS_PER_TARGET" -timeout=5 -rss_limit_mb=1024 \
      -artifact_prefix="$WORK/crash-$target-" "$WORK/corpus-$target" >"$WORK/$target.log" 2>&1; then
    execs=$(grep -oE "Done [0-9]+ runs" "$WORK/$target.log" | grep -oE "[0-9]+" || echo "?")
    echo "fuzz $target: ${execs} executions in ${SECONDS_PER_TARGET}s, no crash" >"$report"
  else
    { echo "fuzz $target: CRASH"; tail -40 "$WORK/$target.log"
      for f in "$WORK"/crash-"$target"-*; do [ -e "$f" ] && xxd "$f" | head -20; done; } >"$report"
    return 1
  fi
}

# The reports printed in order.
status=0
in_parallel fuzz_one "${TARGETS[@]}" || status=1
for target in "${TARGETS[@]}"; do cat "$WORK/$target.report"; done
exit $status
