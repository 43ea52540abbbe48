// N ranks as threads in one process, each with its own Communicator over a
// real transport (shared memory, as one machine's ranks get by default; TCP
// or RDMA with KOLO_TRANSPORT=tcp or ib), rendezvousing through an
// in-memory store. KOLO_TEST_HOSTS=K places the ranks on K emulated hosts
// (blocks of consecutive ranks, told apart by Config::host_name), so the
// ranks of one host share memory and reach the others over TCP.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/communicator.h"
#include "transport/memory_store.h"

namespace kolo {

class ThreadWorld {
 public:
  ThreadWorld(int n, Config config) : ThreadWorld(n, [config](int) { return config; }) {}
  // Each rank's configuration of its own (e.g. a GPU of its own).
  ThreadWorld(int n, const std::function<Config(int)>& config_of) : comms_(n) {
    std::vector<std::thread> threads;
    std::vector<Status> status(n);
    const char* hosts = std::getenv("KOLO_TEST_HOSTS");
    const int k = hosts ? std::max(1, std::atoi(hosts)) : 0;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] {
        Config config = config_of(r);
        if (k > 0) config.host_name = "emulated-host-" + std::to_string(r * k / n);
        status[r] = Communicator::create_with_store(r, n, &store_, config, &comms_[r]);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < n; ++r) EXPECT_TRUE(status[r].is_ok()) << "rank " << r << ": " << status[r].to_string();
  }

  // The same n ranks as a split communicator: a world of n + 1 ranks
  // splits with one color and keys reversed (split rank r is world rank
  // n - 1 - r) while its last rank passes no color; comm() and run() then
  // use the split (the world stays, unused).
  struct AsSplit {};
  ThreadWorld(int n, Config config, AsSplit as_split)
      : ThreadWorld(n, [config](int) { return config; }, as_split) {}
  // The same with world rank w's Config from config_of(w).
  ThreadWorld(int n, const std::function<Config(int)>& config_of, AsSplit) : ThreadWorld(n + 1, config_of) {
    std::vector<std::unique_ptr<Communicator>> splits(n + 1);
    run([&](int r) {
      const int color = r < n ? 0 : Communicator::kSplitNoColor;
      Status s = comms_[r]->split(color, -r, &splits[r]);
      EXPECT_TRUE(s.is_ok()) << "rank " << r << ": " << s.to_string();
    });
    EXPECT_EQ(splits[n], nullptr);
    parents_ = std::move(comms_);
    comms_.clear();
    for (int r = n - 1; r >= 0; --r) comms_.push_back(std::move(splits[r]));
  }

  int size() const { return static_cast<int>(comms_.size()); }
  Store& store() { return store_; }
  // Destroys rank r's communicator, as if that rank had died.
  void release(int r) { comms_[r].reset(); }
  Communicator& comm(int r) { return *comms_[r]; }
  // Rank r's communicator, for the caller to own (a CommunicatorHandle
  // with an engine beside it); comm(r) is then gone.
  std::unique_ptr<Communicator> take(int r) { return std::move(comms_[r]); }

  // Runs fn(rank) on every rank concurrently.
  void run(const std::function<void(int)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) threads.emplace_back(fn, r);
    for (auto& t : threads) t.join();
  }

 private:
  MemoryStore store_;
  std::vector<std::unique_ptr<Communicator>> parents_;  // AsSplit: the world split
  std::vector<std::unique_ptr<Communicator>> comms_;
};

// A small, fast configuration for tests: short deadline, small segments so
// that modest counts already need many segments.
// The ring is forced for every size (small_allreduce_bytes = 0) unless a
// test asks for the small-message algorithm.
inline Config test_config(int64_t segment_bytes = 4096, int64_t small_allreduce_bytes = 0) {
  Config c;
  c.timeout_s = 60;
  c.segment_bytes = segment_bytes;
  c.small_allreduce_bytes = small_allreduce_bytes;
  c.spin_us = 20;
  // KOLO_TRANSPORT picks the transport under test (the RDMA suite runs these
  // tests in a soft-RoCE VM with KOLO_TRANSPORT=ib); else auto, as users get.
  if (const char* t = std::getenv("KOLO_TRANSPORT")) c.transport = t;
  // KOLO_ENCRYPT=1 seals every TCP connection (over_transport.sh tcp+encrypt),
  // with the job's secret from KOLO_SECRET.
  if (const char* e = std::getenv("KOLO_ENCRYPT")) c.encrypt = std::string(e) == "1";
  if (const char* s = std::getenv("KOLO_SECRET")) c.secret = s;
  return c;
}

// For suites run on worlds of several sizes, each also as a split
// (ThreadWorld::AsSplit): the world a (ranks, on_split) parameter names, and
// the parameter's test name ("N3", "N3_split").
using WorldParam = std::tuple<int, bool>;

inline ThreadWorld make_world(const WorldParam& p, Config config = test_config()) {
  if (std::get<1>(p)) return ThreadWorld(std::get<0>(p), config, ThreadWorld::AsSplit{});
  return ThreadWorld(std::get<0>(p), config);
}

// Every size from 1 to max_ranks; under ThreadSanitizer 1 to 4. TSan looks
// for races between ranks' threads, which 2, 3 (odd) and 4 already race;
// larger worlds choose other schedules, not other ways of sharing memory,
// and run in the optimized and ASan passes. Under TSan (each rank's thread
// 5-15x slower, 8 of them on 2 cores) sizes 5 to 8 took over half of the
// pass's conformance time: 8 alone, 150 s of collectives_test's shards.
inline std::vector<int> world_sizes_up_to(int max_ranks) {
  std::vector<int> sizes;
  for (int n = 1; n <= max_ranks; ++n) {
#if defined(__SANITIZE_THREAD__)
    if (n > 4) break;
#endif
    sizes.push_back(n);
  }
  return sizes;
}

inline auto worlds_up_to(int max_ranks) {
  return ::testing::Combine(::testing::ValuesIn(world_sizes_up_to(max_ranks)), ::testing::Bool());
}

inline std::string world_name(const ::testing::TestParamInfo<WorldParam>& info) {
  return "N" + std::to_string(std::get<0>(info.param)) + (std::get<1>(info.param) ? "_split" : "");
}

}  // namespace kolo
