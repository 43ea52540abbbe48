// The machine's memory bandwidth as a copy sees it, with every core copying
// at once: the yardstick the shared-memory results are stated against
// (bench/duel.sh). Each thread copies its own buffers, larger than any
// cache, back and forth; the best of several rounds is printed as bytes
// copied per second over all threads.
//   memcpy_bandwidth [BYTES_PER_THREAD] [THREADS]   (default 64 MiB, one per core)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : size_t{64} << 20;
  const int threads = argc > 2 ? std::atoi(argv[2]) : static_cast<int>(std::thread::hardware_concurrency());
  if (bytes == 0 || threads < 1) {
    std::fprintf(stderr, "usage: memcpy_bandwidth [BYTES_PER_THREAD] [THREADS]\n");
    return 2;
  }
  std::vector<std::vector<char>> a(threads, std::vector<char>(bytes, 1)), b(threads, std::vector<char>(bytes, 2));
  constexpr int kCopies = 8;
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        for (int i = 0; i < kCopies; ++i) {
          if (i % 2) std::memcpy(a[t].data(), b[t].data(), bytes);
          else std::memcpy(b[t].data(), a[t].data(), bytes);
        }
      });
    }
    for (auto& th : pool) th.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, static_cast<double>(bytes) * kCopies * threads / s);
  }
  std::printf("memcpy %.3f GB/s (%d threads, %zu bytes each)\n", best / 1e9, threads, bytes);
  return 0;
}
