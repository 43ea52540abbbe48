// The machine's memory bandwidth as a copy sees it, with every core copying
// at once: the yardstick the shared-memory results are stated against
// (bench/duel.sh). Each thread copies its own buffers, larger than any
// cache, back and forth; the best of several rounds is printed as bytes
// copied per second over all threads. Two copies run: libc's memcpy and
// kolo's streaming copy (Memory::copy_streaming, around the caches), and
// the first figure printed is the better one: libc sizes its own switch to
// streaming stores from the cache size the system reports, which on some
// machines is the whole socket's (sysconf said 384 MiB on the EPYC VMs,
// where a core shares 32 MiB), so that its 64 MiB copies read every
// destination line first and the bound came out low.
//   memcpy_bandwidth [BYTES_PER_THREAD] [THREADS]   (default 64 MiB, one per core)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "collectives/memory.h"

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{64} << 20;
  const int threads = argc > 2 ? std::atoi(argv[2]) : static_cast<int>(std::thread::hardware_concurrency());
  if (bytes == 0 || threads < 1) {
    std::fprintf(stderr, "usage: memcpy_bandwidth [BYTES_PER_THREAD] [THREADS]\n");
    return 2;
  }
  std::vector<std::vector<char>> a(threads, std::vector<char>(bytes, 1)), b(threads, std::vector<char>(bytes, 2));
  constexpr int kCopies = 8;
  kolo::HostMemory memory;
  const auto measure = [&](bool streaming) {
    double best = 0;
    for (int round = 0; round < 5; ++round) {
      const auto start = std::chrono::steady_clock::now();
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          for (int i = 0; i < kCopies; ++i) {
            char* to = i % 2 ? a[t].data() : b[t].data();
            const char* from = i % 2 ? b[t].data() : a[t].data();
            if (streaming) {
              memory.copy_streaming(to, from, bytes);
            } else {
              std::memcpy(to, from, bytes);
            }
          }
        });
      }
      for (auto& th : pool) th.join();
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      best = std::max(best, static_cast<double>(bytes) * kCopies * threads / s);
    }
    return best;
  };
  const double plain = measure(false), streaming = measure(true);
  std::printf("memcpy %.3f GB/s (the better of memcpy %.3f and a streaming copy %.3f; %d threads, %zu bytes each)\n",
              std::max(plain, streaming) / 1e9, plain / 1e9, streaming / 1e9, threads, bytes);
  return 0;
}
