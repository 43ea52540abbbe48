#!/usr/bin/env bash
# The engine through the C API only: the worker is compiled here against
# kolo.h and linked against libkolo.so alone (as a framework adapter would
# be), run on 3 ranks by kolorun, and its timeline checked with a real JSON
# parser for every phase.
set -uo pipefail
ROOT="$TEST_SRCDIR/$TEST_WORKSPACE"
# shellcheck source=tests/lib/common.sh
. "$ROOT/tests/lib/common.sh"  # library_sanitizer
LIBDIR="$ROOT/bindings/c"
WORK="${TEST_TMPDIR:-/tmp}/engine_c"
mkdir -p "$WORK"
# A sanitizer build of the library needs the same sanitizer in the program.
SAN=""
case "$(library_sanitizer "$LIBDIR/libkolo.so")" in
  asan) SAN="-fsanitize=address,undefined" ;;
  tsan) SAN="-fsanitize=thread" ;;
esac
cc -std=c11 -Wall -Werror $SAN -I"$ROOT" "$ROOT/tests/engine_c_worker.c" -o "$WORK/worker" \
   -L"$LIBDIR" -l:libkolo.so -Wl,-rpath,"$LIBDIR" || { echo "FAIL: worker does not build against libkolo.so"; exit 1; }
readelf -d "$WORK/worker" | grep NEEDED | grep -q 'libkolo.so' || { echo "FAIL: worker is not linked to libkolo.so"; exit 1; }

TIMELINE="$WORK/timeline.json"
# The ring, whose two phases the timeline marks (the shared-memory
# allreduce, which one host's ranks take by default, records one ALLREDUCE).
if ! KOLO_ALGORITHM=ring timeout 120 "$ROOT/tools/kolorun" -np 3 "$WORK/worker" "$TIMELINE" >"$WORK/out" 2>&1; then
  echo "FAIL: the C engine worker failed"; cat "$WORK/out"; exit 1
fi
for r in 0 1 2; do
  grep -q "^\[$r\] rank $r engine ok" "$WORK/out" || { echo "FAIL: rank $r"; cat "$WORK/out"; exit 1; }
done

python3 - "$TIMELINE" <<'PY' || exit 1
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["name"] for e in events}
need = {"SUBMITTED", "QUEUED", "NEGOTIATING", "WAITING_FOR_OTHER_RANKS", "MEMCPY_IN_FUSION_BUFFER",
        "RING_REDUCE_SCATTER", "RING_ALLGATHER", "MEMCPY_OUT_FUSION_BUFFER", "ALLGATHER", "DONE", "FAILED"}
missing = need - names
if missing:
    sys.exit("FAIL: timeline lacks phases %s (has %s)" % (sorted(missing), sorted(names)))
lanes = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
for t in ("grad/0", "grad/39", "rows", "bad"):
    if t not in lanes:
        sys.exit("FAIL: timeline has no row for tensor %s" % t)
for e in events:
    if e["ph"] == "X" and e["dur"] < 0:
        sys.exit("FAIL: negative duration in %s" % e)
print("timeline: %d events, %d tensors, phases %s" % (len(events), len(lanes), sorted(names & need)))
PY
echo "engine_c_test: ok"
