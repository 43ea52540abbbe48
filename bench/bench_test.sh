#!/usr/bin/env bash
# End to end: a short sweep and a short scaling run through kolorun, and the
# JSON they write checked for shape and arithmetic; the call-cost probe and
# the barrier floor.
set -uo pipefail
KOLORUN="$TEST_SRCDIR/$TEST_WORKSPACE/tools/kolorun"
BENCH="$TEST_SRCDIR/$TEST_WORKSPACE/bench/kolo_bench"
DIR="${TEST_TMPDIR:-/tmp}"
fail() { echo "FAIL: $*"; exit 1; }

# Through a file: grep -q stops reading at the match, and the rest of the
# help would then meet a closed pipe.
"$BENCH" --help >"$DIR/help.txt" || fail "--help failed"
grep -q "busbw = algbw x factor" "$DIR/help.txt" || fail "--help does not explain busbw"
grep -q "^simulate:" "$DIR/help.txt" || fail "--help does not explain simulate"

# The simulator: one process, no launcher; auto's choice and its estimate.
"$BENCH" simulate --layout 4x2 --min-bytes 64K --max-bytes 64K >"$DIR/sim.txt" || fail "simulate failed"
grep -qE "^ +65536 .* (recursive_doubling|halving_doubling|ring|tree|hierarchical) " "$DIR/sim.txt" || fail "simulate printed no row: $(cat "$DIR/sim.txt")"
"$BENCH" simulate --layout 0x1 >/dev/null 2>&1 && fail "simulate took a layout of no hosts"
"$BENCH" simulate --min-bytes 1M --max-bytes 1M | grep -q "^# simulated: 8 hosts x 1 ranks" ||
  fail "simulate's default layout is not --help's 8x1"

timeout 120 "$KOLORUN" -np 3 "$BENCH" sweep --collective allreduce --dtype bfloat16 --op max --min-bytes 4K \
  --max-bytes 1M --iters 5 --link-gbps 5 --json "$DIR/sweep.json" >"$DIR/sweep.out" 2>&1 ||
  { cat "$DIR/sweep.out"; fail "sweep failed"; }
# In place (as the duels call it): checked on the first call of each size.
timeout 120 "$KOLORUN" -np 3 --no-prefix "$BENCH" --in-place --min-bytes 8 --max-bytes 4M --step-factor 64 --iters 3 \
  >"$DIR/in_place.out" 2>&1 || { cat "$DIR/in_place.out"; fail "the in-place sweep failed"; }
[ "$(grep -cE "^ +[0-9]+ .* OK " "$DIR/in_place.out")" = 4 ] || fail "the in-place sweep printed: $(cat "$DIR/in_place.out")"
timeout 60 "$KOLORUN" -np 2 "$BENCH" --in-place --collective allgather >/dev/null 2>&1 &&
  fail "--in-place was taken for an allgather"
timeout 300 "$KOLORUN" -np 2 "$BENCH" scaling --model resnet50 --steps 2 --compute-ms 60 --predict-ranks 64 \
  --json "$DIR/scaling.json" >"$DIR/scaling.out" 2>&1 || { cat "$DIR/scaling.out"; fail "scaling failed"; }
grep -q "PREDICTION" "$DIR/scaling.out" || fail "the prediction is not labelled as one"

# The call-cost probe: a row per size, and a size it cannot take refused.
CALL_COST="$TEST_SRCDIR/$TEST_WORKSPACE/bench/call_cost"
timeout 60 "$KOLORUN" -np 2 --no-prefix "$CALL_COST" --bytes 8 --bytes 2048 --iters 200 --batches 2 >"$DIR/call.out" 2>&1 ||
  { cat "$DIR/call.out"; fail "call_cost failed"; }
[ "$(grep -cE "^ +(8|2048) B +[0-9]+ ns$" "$DIR/call.out")" = 2 ] || fail "call_cost printed: $(cat "$DIR/call.out")"
"$CALL_COST" --bytes 6 >/dev/null 2>&1 && fail "call_cost took 6 bytes of float32"

# The floor bench/latency_duel.sh prints: one line from rank 0 of three,
# and outside kolorun a clear refusal.
FLOOR="$TEST_SRCDIR/$TEST_WORKSPACE/bench/barrier_floor"
timeout 60 "$KOLORUN" -np 3 --no-prefix "$FLOOR" --iters 200 >"$DIR/floor.out" 2>&1 ||
  { cat "$DIR/floor.out"; fail "barrier_floor failed"; }
grep -qE "^3 rank\(s\) on [0-9]+ core\(s\).*: a barrier takes [0-9.]+ us$" "$DIR/floor.out" ||
  fail "barrier_floor printed: $(cat "$DIR/floor.out")"
env -u KOLO_JOB_ID "$FLOOR" >"$DIR/floor_alone.out" 2>&1 && fail "barrier_floor ran outside kolorun"
grep -q "run it under kolorun" "$DIR/floor_alone.out" || fail "barrier_floor alone said: $(cat "$DIR/floor_alone.out")"

python3 - "$DIR/sweep.json" "$DIR/scaling.json" <<'PY' || fail "JSON checks failed"
import json, sys
sweep = json.load(open(sys.argv[1]))
assert sweep["mode"] == "sweep" and sweep["ranks"] == 3 and sweep["dtype"] == "bfloat16" and sweep["op"] == "max"
assert abs(sweep["bus_factor"] - 2 * 2 / 3) < 1e-6
sizes = [r["bytes"] for r in sweep["rows"]]
assert len(sizes) == 5 and sizes == sorted(sizes), sizes
for r in sweep["rows"]:
    assert r["check"] is True, r
    assert r["time_us"] > 0
    assert abs(r["algbw_gbps"] - r["bytes"] / (r["time_us"] * 1e-6) / 1e9) < 1e-6 * r["algbw_gbps"] + 1e-12
    assert abs(r["busbw_gbps"] - r["algbw_gbps"] * sweep["bus_factor"]) < 1e-6 * r["busbw_gbps"] + 1e-12
    ideal = 2 * 2 * r["bytes"] / 5e9 / (r["time_us"] * 1e-6) * 100
    assert abs(r["ideal_pct"] - ideal) < 1e-6 * ideal + 1e-9
scaling = json.load(open(sys.argv[2]))
assert scaling["mode"] == "scaling" and scaling["ranks"] == 2
(m,) = scaling["models"]
assert m["model"] == "resnet50" and m["parameters"] == 25557032 and m["tensors"] == 161
assert 1 <= m["buckets"] <= 161
assert m["t1_ms"] >= 60 and m["tn_ms"] >= m["t1_ms"] * 0.98, m
assert 0 < m["efficiency"] <= 1.05, m
p = m["prediction"]
assert p["ranks"] == 64 and 0 < p["efficiency"] <= 1.05 and p["link_gbps"] > 0, p
print("bench_test: sweep and scaling JSON consistent")
PY
echo "bench_test: passed"
