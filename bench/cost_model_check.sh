#!/usr/bin/env bash
# The cost model and the simulator against measurement on emulated hosts
# (network namespaces, tools/netns.sh; as root). For each layout (H hosts x
# L ranks) and link rate:
#   1. the links, measured in the run (below: how);
#   2. every allreduce algorithm forced (KOLO_ALGORITHM), and auto with
#      those links as KOLO_LINK_COSTS, swept over sizes;
#   3. per size: each algorithm's time, auto's choice and its time against
#      the best measured, and what the simulator (kolo_bench simulate, the
#      same links) gives for each algorithm.
#   sudo bash bench/cost_model_check.sh ["8x1 4x2"] ["1gbit 10gbit"]
# MAX_BYTES bounds the sweep (default 16M); ITERS the timed iterations.
set -euo pipefail
# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
LAYOUTS="${1:-8x1 4x2}"
RATES="${2:-1gbit 10gbit}"
MAX_BYTES="${MAX_BYTES:-16M}"
ITERS="${ITERS:-10}"
ALGORITHMS="ring recursive_doubling halving_doubling tree hierarchical"
export KOLO_NETNS_PREFIX="${KOLO_NETNS_PREFIX:-kc-}"

why=$(bash tools/netns.sh probe) || { echo "cost_model_check: cannot emulate hosts here: $why" >&2; exit 1; }
build_and_copy cost-model //bench:kolo_bench
trap 'bash tools/netns.sh down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

# run NAME NP HOSTS [ENV...] -- ARGS: kolo_bench's sweep as JSON in WORK/NAME.json
run() {
  local name=$1 np=$2 hosts=$3
  shift 3
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 900 tools/kolorun -np "$np" --no-prefix --netns "${KOLO_NETNS_PREFIX}:$hosts" \
    "$WORK/kolo_bench" --iters "$ITERS" --warmup 2 --no-check --json "$WORK/$name.json" "$@" >/dev/null 2>"$WORK/$name.err" ||
    { cat "$WORK/$name.err" >&2; return 1; }
}
time_us() { python3 -c "import json,sys; print(json.load(open('$WORK/$1.json'))['rows'][$2]['time_us'])"; }

for rate in $RATES; do
  for layout in $LAYOUTS; do
    H=${layout%x*} L=${layout#*x} N=$((${layout%x*} * ${layout#*x}))
    bash tools/netns.sh down >/dev/null 2>&1 || true
    bash tools/netns.sh up "$H" "$rate" >/dev/null
    # 1. The links. Latency between hosts: recursive doubling's 64 bytes
    # over all N ranks, per round (log2 N exchanges; where ranks outnumber
    # the cores, waking a rank is part of every message's latency, so it is
    # measured with as many ranks as the sweep has). Bandwidth: a 16 MiB
    # ring between two hosts (each rank moves the buffer once each way).
    # Within a host the same with two ranks of one host.
    run remote "$N" "$H" KOLO_ALGORITHM=recursive_doubling -- --min-bytes 64 --max-bytes 64 --iters 50
    run remote_bw 2 2 KOLO_ALGORITHM=ring -- --min-bytes 16M --max-bytes 16M
    run local 2 1 KOLO_ALGORITHM=recursive_doubling -- --min-bytes 64 --max-bytes 64 --iters 50
    run local_bw 2 1 KOLO_ALGORITHM=ring -- --min-bytes 16M --max-bytes 16M
    links=$(python3 - "$(time_us remote 0)" "$(time_us remote_bw 0)" "$(time_us local 0)" "$(time_us local_bw 0)" "$N" <<'PY'
import math, sys
r_lat, r_bw, l_lat, l_bw = map(float, sys.argv[1:5])
rounds = max(1, int(math.log2(int(sys.argv[5]))))
mib16 = 16 * 1024 * 1024
print("local=%.3g/%.4g,remote=%.3g/%.4g" % (l_lat, mib16 / l_bw / 1e3, r_lat / rounds, mib16 / r_bw / 1e3))
PY
)
    echo "== $H hosts x $L ranks, links shaped to $rate; measured links: $links"
    # 2. Every algorithm, and auto with the measured links.
    for a in $ALGORITHMS; do
      run "$a" "$N" "$H" KOLO_ALGORITHM="$a" -- --min-bytes 8 --max-bytes "$MAX_BYTES" --step-factor 8
    done
    run auto "$N" "$H" KOLO_LINK_COSTS="$links" -- --min-bytes 8 --max-bytes "$MAX_BYTES" --step-factor 8
    # The simulator's columns in the order of ALGORITHMS, which the table reads them by.
    "$WORK/kolo_bench" simulate --layout "$layout" --links "$links" --algorithms "${ALGORITHMS// /,}" \
      --min-bytes 8 --max-bytes "$MAX_BYTES" --step-factor 8 > "$WORK/simulated.txt"
    # 3. The table.
    python3 - "$WORK" "$ALGORITHMS" <<'PY'
import json, sys
work, algorithms = sys.argv[1], sys.argv[2].split()
measured = {a: json.load(open("%s/%s.json" % (work, a)))["rows"] for a in algorithms + ["auto"]}
simulated = {}
lines = [l.split() for l in open(work + "/simulated.txt") if l[:1] == " " and l.split()[0].isdigit()]
for cols in lines:
    for a, v in zip(algorithms, cols[1:1 + len(algorithms)]):
        simulated[(a, int(cols[0]))] = None if v == "-" else float(v)
head = "%10s" % "size(B)" + "".join("%22s" % (a + " meas/sim us") for a in algorithms)
print(head + "  %-18s %9s %8s" % ("auto chose", "auto us", "vs best"))
within, total, sim_ok, sim_n = 0, 0, 0, 0
for i, row in enumerate(measured["auto"]):
    b = row["bytes"]
    cells, best = "", None
    for a in algorithms:
        m = measured[a][i]
        applies = m.get("algorithm") == a
        s = simulated.get((a, b))
        if not applies:
            cells += "%22s" % "-"
            continue
        best = m["time_us"] if best is None else min(best, m["time_us"])
        cells += "%22s" % ("%.0f/%s" % (m["time_us"], "%.0f" % s if s else "?"))
        if s:
            sim_n += 1
            sim_ok += abs(s / m["time_us"] - 1) <= 0.10
    ratio = row["time_us"] / best - 1
    total += 1
    within += ratio <= 0.10
    print("%10d%s  %-18s %9.0f %7.0f%%" % (b, cells, row.get("algorithm", "?"), row["time_us"], 100 * ratio))
print("auto within 10%% of the best measured at %d of %d sizes; the simulator within 10%% of the measurement "
      "in %d of %d cells" % (within, total, sim_ok, sim_n))
PY
  done
done
