#!/usr/bin/env bash
# kolo against every peer at one size, interleaved over several rounds, so
# that the machine's drift (these machines are shared and noisy) hits all of
# them alike, each reducing in place. Prints the median busbw of each and
# kolo's ratio to the best peer: kolo as it runs by default (one machine's
# ranks share memory), and kolo_tcp (KOLO_TRANSPORT=tcp) against the best
# TCP peer (Gloo, Open MPI over tcp); and kolo's busbw as a fraction of the
# memory-bandwidth bound (every rank must at least read its input and write its output: N copies
# of the buffer, at the memcpy bandwidth of all cores measured each round),
# and kolo_tcp's as a fraction of the TCP ring bound. That bound comes from
# the loopback ceiling that bench/peers/tcp_ceiling measures each round, two
# concurrent streams under Reno as kolo's own within a host, over N (a ring on one host keeps N streams busy, and
# their bytes share what the cores can push through the kernel), measured
# twice: between buffers that stay in the cache (the stack alone) and between
# buffers of SIZE bytes (each byte read from memory and written to memory).
# A ring's rank sends and receives 2(N-1)/N of its buffer but must read only
# its input and write only its result from and to memory once: N/(2(N-1)) of
# its bytes (all at N=2, two thirds at N=4) are priced at the second rate,
# the rest at the first. Each round also measures a
# cache line's round trip between two cores (bench/core_round_trip): where
# it is long, peers' reads out of each other's caches are slow, and the
# shared-memory figures fall with it (collectives/arena_writes.h); kolo's
# figure is printed per round beside it. bench/core_traffic measures, each
# round, whether a core's reads out of another core's cache overlap its
# traffic to and from memory; where they add up, the memory-bandwidth bound
# is out of reach by their share, and the cap that leaves is printed too.
#   Usage: bash bench/duel.sh [N ...]   (default 2 4)
#   SIZE (67108864)  ROUNDS (5)  ITERS (16)
#   BASELINE: another kolo_bench (e.g. built from an earlier commit) run in
#   the same rounds as "kolo_baseline" and "kolo_tcp_baseline", for a
#   before/after ratio of each.
#   UNBOUND=1: kolo also as "kolo_unbound" and "kolo_tcp_unbound", started
#   with kolorun --bind-to none, for the ratio of kolorun's binding. Where
#   kolorun binds the ranks to cores, each peer runs both as its own
#   launcher places it and bound as kolo's ranks are ("..._bound"), and
#   the faster counts (run_peers.sh's PEER_BINDING).
set -euo pipefail
# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
NS=("$@")
[[ ${#NS[@]} -eq 0 ]] && NS=(2 4)
SIZE="${SIZE:-67108864}"
ROUNDS="${ROUNDS:-5}"
ITERS="${ITERS:-16}"

build_and_copy duel //bench:kolo_bench //bench:memcpy_bandwidth //bench:core_round_trip //bench:core_traffic \
  //bench/peers:tcp_ceiling
RESULTS="$WORK/results"
BY_ROUND="$WORK/by_round"  # kolo's figure and the round trip, per round: $BY_ROUND.N
rm -f "$BY_ROUND".*
BENCHES=("kolo $WORK/kolo_bench" "kolo_tcp $WORK/kolo_bench KOLO_TRANSPORT=tcp")
if [[ -n "${BASELINE:-}" ]]; then
  cp "$BASELINE" "$WORK/kolo_baseline"
  BENCHES+=("kolo_baseline $WORK/kolo_baseline" "kolo_tcp_baseline $WORK/kolo_baseline KOLO_TRANSPORT=tcp")
fi
if [[ -n "${UNBOUND:-}" ]]; then
  BENCHES+=("kolo_unbound $WORK/kolo_bench" "kolo_tcp_unbound $WORK/kolo_bench KOLO_TRANSPORT=tcp")
fi

# kolo in place, as the peers' benchmarks call theirs (bench/peers/mpi_bench.c,
# gloo_bench.cc): out of place, a call also writes a second buffer the
# others never touch. A baseline built before kolo_bench had --in-place
# runs out of place.
in_place() { [[ "$("$1" --help 2>&1)" == *--in-place* ]] && echo --in-place || true; }
declare -A IN_PLACE  # each kolo binary's flag, asked once
IN_PLACE["$WORK/kolo_bench"]=$(in_place "$WORK/kolo_bench")
if [[ -n "${BASELINE:-}" ]]; then
  IN_PLACE["$WORK/kolo_baseline"]=$(in_place "$WORK/kolo_baseline")
  if [[ -z ${IN_PLACE["$WORK/kolo_baseline"]} ]]; then
    echo "duel: the baseline has no --in-place: it runs out of place" >&2
  fi
fi

for ((round = 1; round <= ROUNDS; round++)); do
  echo "== round $round of $ROUNDS" >&2
  "$WORK/memcpy_bandwidth" | awk '{print "memcpy 0", $2}' >>"$RESULTS"
  "$WORK/tcp_ceiling" | awk '/tcp_two_streams_GBps/ {print "tcp_ceiling 0", $2}' >>"$RESULTS"
  "$WORK/tcp_ceiling" --buffer-bytes "$SIZE" |
    awk '/tcp_two_streams_GBps/ {print "tcp_ceiling_memory 0", $2}' >>"$RESULTS"
  round_trip=$("$WORK/core_round_trip" 2>/dev/null | awk '{print $2}' || true)
  "$WORK/core_traffic" 2>/dev/null |
    awk '$1 == "core_traffic_us" {print "traffic_cores 0", $3; print "traffic_memory 0", $5; print "traffic_both 0", $7}' \
      >>"$RESULTS" || true
  for n in "${NS[@]}"; do
    for bench in "${BENCHES[@]}"; do
      read -r name binary settings <<<"$bench"
      binding=auto
      [[ $name == *_unbound ]] && binding=none
      env $settings tools/kolorun -np "$n" --no-prefix --bind-to "$binding" "$binary" ${IN_PLACE["$binary"]} \
        --min-bytes "$SIZE" --max-bytes "$SIZE" --iters "$ITERS" --no-check |
        awk -v n="$n" -v name="$name" '/^ +[0-9]/ {print name, n, $6}' >>"$RESULTS"
      if [[ $name == kolo ]]; then
        tail -1 "$RESULTS" | awk -v r="${round_trip:-?}" '{printf " %s (%s ns)", $3, r}' >>"$BY_ROUND.$n"
      fi
    done
  done
  # The peers: every Gloo algorithm and Open MPI, in fresh processes.
  MIN_BYTES="$SIZE" MAX_BYTES="$SIZE" ITERS="$ITERS" SKIP_CEILING=1 \
    bash bench/peers/run_peers.sh "${NS[@]}" 2>/dev/null |
    awk '/^== gloo algo=/ {split($3, a, "="); name = "gloo_" a[2]; split($4, b, "="); n = b[2]}
         /^== MPI_Allreduce.*btl tcp/ {name = "mpi_tcp"; n = substr($NF, 3)}
         /^== MPI_Allreduce.*btl vader/ {name = "mpi_shm"; n = substr($NF, 3)}
         /^== .*bound like kolorun/ {name = name "_bound"}
         /^ +[0-9]/ && name != "" {print name, n, $5; name = ""}' >>"$RESULTS"
done

echo "# busbw (GB/s) at $SIZE bytes, median of $ROUNDS interleaved rounds; kolo/best = kolo over the best peer"
median_of() {
  awk -v k="$1" '$1 == k {print $3}' "$RESULTS" | sort -g |
    awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
MEMCPY=$(median_of memcpy)
TCP_CEILING=$(median_of tcp_ceiling)
TCP_CEILING_MEMORY=$(median_of tcp_ceiling_memory)
TRAFFIC="$(median_of traffic_cores) $(median_of traffic_memory) $(median_of traffic_both)"
echo "# memcpy bandwidth, all cores: median $MEMCPY GB/s; loopback TCP, two streams: median $TCP_CEILING GB/s" \
  "between cached buffers, $TCP_CEILING_MEMORY GB/s between buffers of $SIZE bytes"
for n in "${NS[@]}"; do
  awk -v n="$n" '$2 == n {print $1, $3}' "$RESULTS" | sort -k1,1 -k2,2g |
    awk -v n="$n" -v memcpy="$MEMCPY" -v tcp_ceiling="$TCP_CEILING" -v tcp_memory="$TCP_CEILING_MEMORY" -v traffic="$TRAFFIC" '
      {v[$1] = v[$1] " " $2; c[$1]++}
      END {
        for (k in v) {
          m = split(substr(v[k], 2), xs, " ");
          med = (m % 2) ? xs[(m + 1) / 2] : (xs[m / 2] + xs[m / 2 + 1]) / 2;
          printf "N=%s %-24s median %6.3f  all:%s\n", n, k, med, v[k];
          if (k == "kolo") kolo = med; else if (k == "kolo_baseline") base = med;
          else if (k == "kolo_tcp") tcp = med; else if (k == "kolo_tcp_baseline") tcp_base = med;
          else if (k == "kolo_unbound") unbound = med; else if (k == "kolo_tcp_unbound") tcp_unbound = med;
          else {
            if (med > best) { best = med; bestname = k }
            if (k !~ /^mpi_shm/ && med > best_tcp) { best_tcp = med; best_tcp_name = k }
          }
        }
        if (best > 0) printf "N=%s kolo/best = %.2fx (best peer: %s)\n", n, kolo / best, bestname;
        if (best_tcp > 0) printf "N=%s kolo_tcp/best TCP peer = %.2fx (%s)\n", n, tcp / best_tcp, best_tcp_name;
        bound = 2 * (n - 1) / n * memcpy / n;
        if (memcpy > 0) printf "N=%s kolo = %.0f%% of the memory-bandwidth bound (%.2f GB/s busbw)\n", n, 100 * kolo / bound, bound;
        # What of that bound a rank can reach where its reads out of the
        # other cores caches (2(N-1)/N of its buffer) take the time of its
        # core as memory traffic does: bench/core_traffic times 256 KiB from
        # a peer, 512 KiB through memory, and both at once (their overlap).
        split(traffic, t, " ");
        if (memcpy > 0 && t[1] > 0 && t[2] > 0 && t[3] > 0) {
          overlap = t[3] / (t[1] + t[2]);
          cap = t[2] / (overlap * (t[2] + 4 * (n - 1) / n * t[1]));
          if (cap > 1) cap = 1;
          printf "N=%s cap where cores and memory share a core (bench/core_traffic, both at once %.2f of their sum): %.0f%% of the bound; kolo = %.0f%% of the cap\n", n, overlap, 100 * cap, 100 * kolo / bound / cap;
        }
        if (tcp_ceiling > 0 && tcp_memory > 0 && tcp > 0) {
          in_memory = n / (2 * (n - 1));
          ring_bound = 1 / (in_memory / tcp_memory + (1 - in_memory) / tcp_ceiling) / n;
          printf "N=%s kolo_tcp = %.0f%% of the TCP ring bound (%.2f GB/s busbw: %.0f%% of its bytes from and to memory)\n", n, 100 * tcp / ring_bound, ring_bound, 100 * in_memory;
          printf "N=%s kolo_tcp = %.0f%% of the cached streams alone (%.2f GB/s busbw)\n", n, 100 * tcp / (tcp_ceiling / n), tcp_ceiling / n;
        }
        if (base > 0) printf "N=%s kolo/kolo_baseline = %.2fx\n", n, kolo / base;
        if (tcp_base > 0) printf "N=%s kolo_tcp/kolo_tcp_baseline = %.2fx\n", n, tcp / tcp_base;
        if (unbound > 0) printf "N=%s kolo/kolo_unbound = %.2fx\n", n, kolo / unbound;
        if (tcp_unbound > 0) printf "N=%s kolo_tcp/kolo_tcp_unbound = %.2fx\n", n, tcp / tcp_unbound;
      }'
  if [[ -f "$BY_ROUND.$n" ]]; then
    echo "N=$n kolo by round (a cache line's round trip between two cores):$(cat "$BY_ROUND.$n")"
  fi
done
