// What a shared-memory allreduce's traffic costs a core, part by part, and
// whether the parts overlap. Two threads, one per CPU, in steps: each
// writes a 256 KiB piece (its slot, say), both meet at a barrier, then each
//   cores:  copies the other's piece (out of the other core's cache),
//   memory: copies 512 KiB of a 64 MiB input to a 64 MiB output around the
//           cache (Memory::copy_streaming: memory in, memory out),
//   both:   does both, a page of each in turn (Memory::copy_together),
// and they meet again. Every rank of the arena's allreduce does both kinds
// on every chunk: its input in and result out through memory, and 2(N-1)/N
// of the chunk out of its peers' caches. Where both kinds wait on the same
// core's outstanding misses, their times add instead of overlapping, and
// the memory-bandwidth bound of bench/duel.sh (memory traffic only) is out
// of reach by the share the cores' traffic takes (bench/duel.sh prints
// that cap per N from these figures). Prints each mode's time per step less
// the writes' and barriers' (measured alone), and the rates.
//   core_traffic [CPU_A CPU_B]   (default: the first two CPUs this process may use)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/two_cpus.h"
#include "collectives/memory.h"

namespace {

constexpr size_t kPiece = 256 << 10;  // a slot's share of a chunk
constexpr size_t kStream = 512 << 10;  // a chunk's input in and result out
constexpr size_t kBig = size_t{64} << 20;
constexpr int kSteps = 1024;

enum Mode { kBase, kCores, kMemory, kBoth };

class Barrier {
 public:
  void wait() {
    const int g = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1) == 1) {
      arrived_.store(0);
      generation_.fetch_add(1, std::memory_order_release);
    } else {
      while (generation_.load(std::memory_order_acquire) == g) {
      }
    }
  }

 private:
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<int> generation_{0};
};

// Microseconds per step, the mean of the two threads'.
double run(Mode mode, const int cpus[2]) {
  std::vector<unsigned char> pieces[2] = {std::vector<unsigned char>(2 * kPiece),
                                          std::vector<unsigned char>(2 * kPiece)};
  Barrier barrier;
  double us[2] = {0, 0};
  const auto body = [&](int me) {
    if (!kolo::pin_to_cpu(cpus[me])) std::fprintf(stderr, "core_traffic: cannot run on CPU %d\n", cpus[me]);
    kolo::HostMemory memory;
    std::vector<unsigned char> in(kBig, 1), out(kBig, 2), scratch(kPiece);
    barrier.wait();
    const auto start = std::chrono::steady_clock::now();
    for (int s = 0; s < kSteps; ++s) {
      std::memset(&pieces[me][(s % 2) * kPiece], s, kPiece);
      barrier.wait();
      const unsigned char* peer = &pieces[1 - me][(s % 2) * kPiece];
      const size_t at = static_cast<size_t>(s) * kStream % kBig;
      const kolo::Memory::CopyJob from_peer{scratch.data(), peer, kPiece, false};
      const kolo::Memory::CopyJob through_memory{&out[at], &in[at], kStream, true};
      if (mode == kCores) memory.copy(from_peer.dst, from_peer.src, from_peer.bytes);
      if (mode == kMemory) memory.copy_streaming(through_memory.dst, through_memory.src, through_memory.bytes);
      if (mode == kBoth) memory.copy_together(from_peer, through_memory);  // as the arena's copy out and in
      barrier.wait();
    }
    us[me] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / kSteps * 1e6;
  };
  std::thread other(body, 1);
  body(0);
  other.join();
  return (us[0] + us[1]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  int cpus[2];
  if (!kolo::two_cpus(argc, argv, "core_traffic", cpus)) return 2;
  // The best of three runs of each mode, the modes interleaved.
  double best[4] = {1e9, 1e9, 1e9, 1e9};
  for (int round = 0; round < 3; ++round) {
    for (Mode m : {kBase, kCores, kMemory, kBoth}) best[m] = std::min(best[m], run(m, cpus));
  }
  const double cores = best[kCores] - best[kBase], memory = best[kMemory] - best[kBase];
  const double both = best[kBoth] - best[kBase];
  std::printf("core_traffic_us cores %.2f memory %.2f both %.2f\n", cores, memory, both);
  std::printf("core_traffic cores %.1f us (256 KiB out of the other core's cache: %.1f GB/s), memory %.1f us "
              "(512 KiB in and out around the cache: %.1f GB/s a core), both %.1f us: %.2f of their sum "
              "(1: they add, no overlap; %.2f: full overlap)\n",
              cores, kPiece / cores / 1e3, memory, kStream / memory / 1e3, both, both / (cores + memory),
              std::max(cores, memory) / (cores + memory));
  return 0;
}
