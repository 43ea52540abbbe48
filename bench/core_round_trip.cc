// How long a cache line takes to go from one core to another and back: two
// threads, each on its own CPU, pass a counter back and forth through one
// line. The shared-memory results depend on it as much as on the memory
// bandwidth: peers read each other's data out of the writer's cache, and
// each line costs a trip between the cores when they share no cache. On
// the 2-core development VM it is 50-60 ns at times and 300-350 ns at
// others (its host runs the two cores close together or far apart), and
// the arena's 64 MiB allreduce then runs 4x slower through the cache
// (collectives/arena_writes.h); bench/duel.sh prints it every round.
//   core_round_trip [CPU_A CPU_B]   (default: the first two CPUs this process may use)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "bench/two_cpus.h"

int main(int argc, char** argv) {
  int cpus[2];
  if (!kolo::two_cpus(argc, argv, "core_round_trip", cpus)) return 2;
  constexpr long kTrips = 200000;
  alignas(64) static std::atomic<long> line{0};
  double best = 1e9;
  for (int round = 0; round < 3; ++round) {
    line.store(0);
    std::thread echo([&] {
      if (!kolo::pin_to_cpu(cpus[1])) {
        std::fprintf(stderr, "core_round_trip: cannot run on CPU %d\n", cpus[1]);
      }
      for (long i = 0; i < kTrips; ++i) {
        while (line.load(std::memory_order_acquire) != 2 * i + 1) {
        }
        line.store(2 * i + 2, std::memory_order_release);
      }
    });
    if (!kolo::pin_to_cpu(cpus[0])) std::fprintf(stderr, "core_round_trip: cannot run on CPU %d\n", cpus[0]);
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < kTrips; ++i) {
      line.store(2 * i + 1, std::memory_order_release);
      while (line.load(std::memory_order_acquire) != 2 * i + 2) {
      }
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    echo.join();
    best = std::min(best, s / kTrips * 1e9);
  }
  std::printf("core_round_trip %.0f ns (a cache line from CPU %d to CPU %d and back, best of 3 x %ld)\n", best,
              cpus[0], cpus[1], kTrips);
  return 0;
}
