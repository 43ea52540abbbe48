// An in-process fabric of EngineLinks for the engine's unit test: ranks
// are threads, and every collective is one exchange of each rank's bytes
// through memory, from which each rank computes its own result with the
// plain reduction kernels. No transport, no algorithm tables: what the
// test sees is the engine's own behaviour. It also counts each rank's calls
// (fusion and the response cache show there), can hold every round at its
// start (so submissions pile up), and can break (a peer lost) on demand.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/engine_link.h"

namespace kolo {

class FakeFabric {
 public:
  explicit FakeFabric(int size, double timeout_s = 30);
  ~FakeFabric();
  FakeFabric(const FakeFabric&) = delete;
  FakeFabric& operator=(const FakeFabric&) = delete;

  int size() const { return size_; }
  // What rank `rank`'s engine connects with. A connect blocks until every
  // rank has connected (like a rendezvous), or `cancel` is called.
  EngineConnector connector(int rank);
  // Makes every connect fail with `why`.
  void refuse_connections(Status why);

  // How many times rank `rank` called each of the link's methods, by name
  // ("allreduce", "allreduce_spans", "allgather", "start_round", ...).
  int calls(int rank, const std::string& what) const;
  // While held, start_round waits (the test submits meanwhile).
  void hold_rounds(bool held);
  // Every pending and later call on every rank fails with `why`, as when a
  // peer's process dies.
  void break_all(Status why);

 private:
  class Link;
  // One collective: every rank's parts, in rank order.
  struct Slot {
    std::string what;
    std::vector<std::vector<std::vector<unsigned char>>> parts;
    int arrived = 0;
    int taken = 0;
    bool mismatch = false;
  };

  Status exchange(int rank, const std::string& what, std::vector<std::vector<unsigned char>> mine,
                  std::vector<std::vector<std::vector<unsigned char>>>* all);
  Status await_round(int rank, Deadline until, bool* peer_started);
  Status start_round(int rank);
  void interrupt(int rank);
  void count(int rank, const std::string& what);
  // Why calls fail now (OK if they do not). Under mu_.
  Status broken_locked(int rank) const;

  const int size_;
  const double timeout_s_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> next_slot_;      // per rank: its next exchange's number
  std::map<uint64_t, Slot> slots_;
  std::vector<int> tokens_;              // per rank: round tokens from its left
  std::vector<bool> interrupted_;
  std::vector<Status> aborted_;          // per rank: its own abort or revoke
  std::vector<std::map<std::string, int>> calls_;
  bool rounds_held_ = false;
  Status broken_;
  int connected_ = 0;
  Status refused_;
  Status cancelled_;
};

}  // namespace kolo
