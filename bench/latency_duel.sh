#!/usr/bin/env bash
# Small allreduces on one machine: kolo as it runs by default (shared
# memory; recursive doubling or the arena, as the cost model chooses), in
# place as bench/peers/mpi_bench.c calls Open MPI's, against Open MPI over
# its shared memory (btl vader, its default on one machine), 8 bytes to
# 64 KiB, interleaved over several rounds so that the machine's drift hits
# both alike. Prints, per N and size, the median and
# the best round's time of each (each round's time: max over ranks of each
# rank's median, as both benchmarks report it) and kolo's time over Open
# MPI's (below 1: kolo is faster), and a cache line's round trip between
# two cores measured each round (bench/core_round_trip: where it is long,
# both take longer), and each round a barrier of N processes placed as
# kolo's ranks, with nothing else (bench/barrier_floor): no call among
# them can take less, and where ranks outnumber the cores it is most of
# both times (the scheduler's switches between the ranks of a core).
# Where kolorun binds kolo's ranks to cores, Open MPI
# runs both as mpirun places its ranks and bound as kolo's are
# (bench/peers/bind_like_kolorun.sh), and each point takes the placement
# with the lower median (its best round: the lower of both).
#   Usage: bash bench/latency_duel.sh [N ...]   (default 2 4 8)
#   ROUNDS (5)  ITERS (200)  MIN_BYTES (8)  MAX_BYTES (64K)  STEP_FACTOR (2: every
#   power of two, so that 8 B, 32 B, 128 B, 512 B, 4 KiB and 64 KiB are all in it)
set -euo pipefail
# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
NS=("$@")
[[ ${#NS[@]} -eq 0 ]] && NS=(2 4 8)
ROUNDS="${ROUNDS:-5}"
ITERS="${ITERS:-200}"
MIN_BYTES="${MIN_BYTES:-8}"
MAX_BYTES="${MAX_BYTES:-64K}"
STEP_FACTOR="${STEP_FACTOR:-2}"
command -v mpicc >/dev/null || { echo "latency_duel: needs Open MPI (mpicc, mpirun)" >&2; exit 1; }

build_and_copy latency //bench:kolo_bench //bench:core_round_trip //bench:barrier_floor
mpicc -O2 -o "$WORK/mpi_bench" bench/peers/mpi_bench.c
to_bytes() { python3 -c "s='$1'; m={'K':1<<10,'M':1<<20}; print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(s))"; }
SWEEP=(--min-bytes "$(to_bytes "$MIN_BYTES")" --max-bytes "$(to_bytes "$MAX_BYTES")" --step-factor "$STEP_FACTOR" --iters "$ITERS"
  --warmup 20)
RESULTS="$WORK/results"
ROUND_TRIPS=""
for ((round = 1; round <= ROUNDS; round++)); do
  echo "== round $round of $ROUNDS" >&2
  ROUND_TRIPS="$ROUND_TRIPS $("$WORK/core_round_trip" 2>/dev/null | awk '{print $2}' || echo '?')"
  for n in "${NS[@]}"; do
    tools/kolorun -np "$n" --no-prefix "$WORK/kolo_bench" "${SWEEP[@]}" --in-place --no-check |
      awk -v n="$n" '/^ +[0-9]/ {print "kolo", n, $1, $3, $NF}' >>"$RESULTS"
    tools/kolorun -np "$n" --no-prefix "$WORK/barrier_floor" --iters 20000 |
      awk -v n="$n" '/a barrier takes/ {print "floor", n, 0, $(NF-1), "-"}' >>"$RESULTS"
    placements=(mpi)
    bench/peers/bind_like_kolorun.sh --binds "$n" && placements+=(mpi_bound)
    for who in "${placements[@]}"; do
      bound=()
      [[ $who == mpi_bound ]] && bound=(bench/peers/bind_like_kolorun.sh)
      timeout 300 mpirun --allow-run-as-root --oversubscribe -np "$n" --mca pml ob1 --mca btl vader,self \
        "${bound[@]}" "$WORK/mpi_bench" "${SWEEP[@]}" 2>/dev/null |
        awk -v n="$n" -v who="$who" '/^ +[0-9]/ {print who, n, $1, $3, "-"}' >>"$RESULTS"
    done
  done
done
python3 - "$RESULTS" "$ROUNDS" <<'PY'
import collections, statistics, sys
times, algorithm = collections.defaultdict(list), {}
for line in open(sys.argv[1]):
    who, n, size, us, algo = line.split()
    times[(who, int(n), int(size))].append(float(us))
    if who == "kolo":
        algorithm[(int(n), int(size))] = algo
print("# allreduce float32 sum, one machine, %s interleaved rounds: time in us (lower is better), the median"
      " and the best of the rounds" % sys.argv[2])
print("%3s %8s %10s %10s %10s %10s %10s %10s %10s  %s" % ("N", "size(B)", "kolo", "Open MPI", "kolo/MPI", "kolo best",
                                                          "MPI best", "best/best", "floor", "kolo's algorithm"))
wins = {"median": 0, "best": 0}
total = 0
for (who, n, size) in sorted(k for k in times if k[0] == "kolo"):
    floor = times.get(("floor", n, 0))
    ks = times[("kolo", n, size)]
    placements = [times[(who, n, size)] for who in ("mpi", "mpi_bound") if times.get((who, n, size))]
    if not placements:
        continue
    ms = min(placements, key=statistics.median)
    best_m = min(min(p) for p in placements)
    k, m = statistics.median(ks), statistics.median(ms)
    total += 1
    wins["median"] += k <= m
    wins["best"] += min(ks) <= best_m
    print("%3d %8d %10.2f %10.2f %9.2fx %10.2f %10.2f %9.2fx %10s  %s" % (
        n, size, k, m, k / m, min(ks), best_m, min(ks) / best_m,
        "%.2f" % statistics.median(floor) if floor else "?", algorithm[(n, size)]))
print("# kolo at or below Open MPI's time at %d of %d (N, size) points by the medians, %d by the best rounds"
      % (wins["median"], total, wins["best"]))
print("# floor: a barrier of the same N processes alone, placed as kolo's ranks (bench/barrier_floor), the median of"
      " the rounds")
PY
echo "# a cache line's round trip between two cores, each round (ns):$ROUND_TRIPS"
