// The least time one call can take among ranks of one machine, where they
// share cores most of all: every rank must run again after the last one
// has arrived, so no allreduce, however small, can beat a barrier of the
// same processes placed the same way. This is that barrier and nothing
// else: each rank writes the round's number on its own cache line of a
// shared mapping and looks at every other's in turn, yielding its core
// between looks where the machine's ranks outnumber its cores, as kolo's
// one-shot does (transport/shm/shm_arena.cc), with no data, no reduction
// and no call path. bench/latency_duel.sh runs it beside kolo and Open MPI.
//   tools/kolorun -np N --no-prefix barrier_floor [--iters I] [--warmup W]
// Prints the statistic kolo_bench's time_us is: each rank's median round,
// the largest over the ranks, in microseconds.
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// One rank's line: the last round it arrived at, and its median at the end.
struct alignas(64) Line {
  std::atomic<long> round;
  std::atomic<long> median_ns;
};

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

int fail(const std::string& why) {
  std::fprintf(stderr, "barrier_floor: %s\n", why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 20000, warmup = 200;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--iters" && i + 1 < argc) iters = std::atoi(argv[++i]);
    else if (a == "--warmup" && i + 1 < argc) warmup = std::atoi(argv[++i]);
    else return fail("usage: barrier_floor [--iters I] [--warmup W] (under kolorun)");
  }
  const int rank = env_int("KOLO_LOCAL_RANK"), size = env_int("KOLO_LOCAL_WORLD_SIZE");
  const char* job = std::getenv("KOLO_JOB_ID");
  if (rank < 0 || size < 1 || rank >= size || !job || iters < 1 || warmup < 0) {
    return fail("run it under kolorun (KOLO_LOCAL_RANK, KOLO_LOCAL_WORLD_SIZE, KOLO_JOB_ID), with --iters of 1 or more");
  }
  // As kolo decides it (runtime/tuning.cc): the machine's cores, not the
  // one kolorun may have bound this rank to.
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const bool yield = size > cores;

  // Every rank creates or opens the same file and sizes it alike; a size
  // already set leaves what others wrote in place.
  const std::string name = std::string("/") + job + "-barrier-floor";
  const size_t bytes = sizeof(Line) * static_cast<size_t>(size);
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return fail("shm_open " + name + ": " + std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) return fail(std::string("ftruncate: ") + std::strerror(errno));
  void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return fail(std::string("mmap: ") + std::strerror(errno));
  Line* lines = static_cast<Line*>(map);

  // No rank waits for ever: a peer that stops coming (it failed to start,
  // or ended) ends the run after a minute without progress. The clock is
  // read only in a wait that has already looked 4096 times.
  long round = 0;
  const auto barrier = [&]() -> bool {
    ++round;
    lines[rank].round.store(round, std::memory_order_release);
    for (int q = 0; q < size; ++q) {
      auto deadline = Clock::time_point::max();
      for (long looks = 1; lines[q].round.load(std::memory_order_acquire) < round; ++looks) {
        if (yield) sched_yield();
        if (looks % 4096 != 0) continue;
        const auto now = Clock::now();
        if (deadline == Clock::time_point::max()) deadline = now + std::chrono::seconds(60);
        if (now > deadline) return false;
      }
    }
    return true;
  };
  if (!barrier()) {
    shm_unlink(name.c_str());  // no file is left behind
    return fail("rank(s) did not arrive within a minute");
  }
  if (rank == 0) shm_unlink(name.c_str());  // all have it mapped now
  for (int i = 0; i < warmup; ++i) {
    if (!barrier()) return fail("rank(s) stopped arriving");
  }
  std::vector<double> t(static_cast<size_t>(iters));
  for (double& s : t) {
    const auto t0 = Clock::now();
    if (!barrier()) return fail("rank(s) stopped arriving");
    s = std::chrono::duration<double>(Clock::now() - t0).count();
  }
  std::nth_element(t.begin(), t.begin() + iters / 2, t.end());
  lines[rank].median_ns.store(static_cast<long>(t[iters / 2] * 1e9), std::memory_order_relaxed);
  if (!barrier()) return fail("rank(s) stopped arriving");
  if (rank == 0) {
    long worst = 0;
    for (int q = 0; q < size; ++q) worst = std::max(worst, lines[q].median_ns.load(std::memory_order_relaxed));
    std::printf("%d rank(s) on %d core(s)%s: a barrier takes %.2f us\n", size, cores, yield ? ", yielding" : "",
                static_cast<double>(worst) / 1e3);
  }
  munmap(map, bytes);
  return 0;
}
