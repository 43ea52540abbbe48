#!/usr/bin/env bash
# Builds the libFuzzer targets in tests/fuzz/ with clang (ASan + UBSan) and
# runs each for a bounded time on a scratch copy of its corpus, so the repo's
# corpus (tests/fuzz/corpus/) stays the reviewed seed set.
#   tools/fuzz.sh [SECONDS_PER_TARGET]   (default 20)
# Prints the executions each target ran; exits non-zero on any crash.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SECONDS_PER_TARGET="${1:-20}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/kolo-fuzz.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
CXX="${CXX_FUZZ:-clang++}"
FLAGS=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I.)

# Each target with the sources it needs (the parsers and what they call).
declare -A SOURCES=(
  [store_request]="runtime/store_protocol.cc common/status.cc common/hmac.cc"
  [handshake]="transport/handshake.cc common/status.cc common/hmac.cc"
  [frame]="transport/frame.cc collectives/fingerprint.cc collectives/dtype.cc collectives/wire_format.cc common/status.cc"
  [torch_reply]="runtime/torch_store_protocol.cc common/status.cc"
  [hostlist]="runtime/slurm_env.cc common/status.cc"
  [op_request]="runtime/op_request.cc collectives/dtype.cc collectives/wire_format.cc common/status.cc"
  [rank_facts]="runtime/rank_facts.cc common/status.cc"
  [failure_record]="runtime/failure_record.cc common/status.cc"
)
# fuzz_one TARGET: builds and runs one target; its report in $WORK/TARGET.report,
# exit status non-zero on a crash.
fuzz_one() {
  local target=$1 report="$WORK/$1.report"
  # shellcheck disable=SC2086
  if ! "$CXX" "${FLAGS[@]}" "tests/fuzz/${target}_fuzz.cc" ${SOURCES[$target]} -o "$WORK/$target" >"$report" 2>&1; then
    echo "fuzz $target: CRASH (did not build)" >>"$report"
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

# As many targets at once as there are cores (each is one process), the
# reports printed in order.
TARGETS=(store_request handshake frame torch_reply hostlist op_request rank_facts failure_record)
status=0
running=0
for target in "${TARGETS[@]}"; do
  if ((running >= $(nproc))); then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$target" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || status=1
  running=$((running - 1))
done
for target in "${TARGETS[@]}"; do cat "$WORK/$target.report"; done
exit $status
