// Cross-rank agreement on which named operations to run, as pure state (no
// I/O): the engine feeds it each round's exchanged data and runs what it
// returns. Every rank's Negotiator sees the same inputs in the same order, so
// all of them reach the same decisions without a coordinator.
//
// A round:
//   1. begin_round() gives this rank's contribution: a control vector (one
//      byte per response-cache slot, plus a flag) and a message with the
//      requests not covered by the cache.
//   2. The engine min-reduces the control vectors over all ranks (so a slot
//      is 1 only where every rank set it) and, only if some rank has a
//      message, allgathers the messages.
//   3. finish_round() applies them: requests enter a table by name; a name
//      is ready once every rank has announced it (ranks that have joined
//      count as present); the ranks' requests are checked against each other
//      (a disagreement fails that name on every rank with MISMATCH); ready
//      names enter the cache.
//
// The cache is what keeps steady state cheap: a training loop submits the
// same names with the same shapes every step; once agreed, a name is one
// byte in the control vector, and a round where all requests hit the cache
// costs one small allreduce and no message at all. Slots are assigned, used
// and evicted (least recently used first) by the same deterministic steps on
// every rank. A request that differs from the cached one (new shape, say) is
// sent as a message; any message naming a cached name evicts it everywhere,
// and ranks holding it by slot re-announce it in full.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "runtime/op_request.h"

namespace kolo {

using SteadyClock = std::chrono::steady_clock;

// An operation every rank agreed to run.
struct OpResponse {
  OpRequest spec;              // the agreed fields (lowest announcing rank's request)
  std::vector<int64_t> rows;   // allgather: rows per rank; alltoall: size x size, [src * size + dst]
  std::vector<int> joined;     // ranks that take part without data (they have joined)
  Status error;                // not OK: no rank runs it; every rank fails the name with this
};

struct RoundContribution {
  std::vector<uint8_t> control;  // min-reduced over ranks
  std::string message;           // allgathered if any rank's is non-empty
};

struct RoundOutcome {
  std::vector<OpResponse> ready;  // in execution order, identical on every rank
  bool join_done = false;         // every rank has joined
  int last_joined = -1;           // the rank whose join came last
  int shutdown_rank = -1;         // a rank that announced its shutdown
  std::string stall_abort;        // rank 0's report, if it ended the job for a stall
  int cache_hits = 0;             // ready through the cache (no message)
};

struct StalledName {
  std::string name;
  OpKind kind;
  std::vector<int> present;  // ranks that announced it
  std::vector<int> missing;  // ranks that did not (and have not joined)
  double age_s;
};

class Negotiator {
 public:
  Negotiator(int rank, int size, size_t cache_capacity);

  // A new local request. Fails (changing nothing) if the name is already
  // pending on this rank, or this rank has joined and not yet been released.
  Status add_local(const OpRequest& request, SteadyClock::time_point now);
  // An engine message (shutdown, stall abort) for the next round.
  void add_internal(const OpRequest& request);
  // This rank joins: announced once its own pending requests are done, so a
  // joined rank never holds requests and every rank knows it takes part in
  // the others' operations without data. Fails if already joining.
  Status join();
  // Sends this rank's cached requests older than `cutoff` in full next round,
  // so the table (and the stall report) knows exactly who has them.
  void expose_older_than(SteadyClock::time_point cutoff);

  // True if begin_round() would carry news (a message) for the other ranks.
  bool has_news() const;
  bool has_local_pending() const { return !local_.empty(); }
  // Earliest submission time among pending local requests (for stall timers).
  SteadyClock::time_point oldest_local() const;

  RoundContribution begin_round();
  // `reduced`: the min over ranks of every control vector; `messages`: every
  // rank's message in rank order, or empty if reduced[0] said none had one.
  Status finish_round(const std::vector<uint8_t>& reduced, const std::vector<std::string>& messages,
                      SteadyClock::time_point now, RoundOutcome* out);

  // Names some ranks announced longer ago than `threshold`.
  std::vector<StalledName> stalled(SteadyClock::time_point now, double threshold_s) const;

  bool joined() const { return joined_[rank_]; }

 private:
  enum class LocalState { kNew, kBySlot, kSent };
  struct Local {
    OpRequest request;
    LocalState state = LocalState::kNew;
    size_t slot = 0;
    bool expose = false;  // send in full even if cached
    SteadyClock::time_point submitted;
  };
  struct Slot {
    bool valid = false;
    OpResponse response;
    uint64_t last_used = 0;
  };
  struct Entry {
    std::vector<bool> present;
    std::vector<OpRequest> requests;  // by rank
    SteadyClock::time_point first_seen;
    // The kind as the first rank to announce the name gave it.
    OpKind kind() const {
      for (size_t q = 0; q < present.size(); ++q) {
        if (present[q]) return requests[q].kind;
      }
      return OpKind::kAllreduce;  // (an entry exists once some rank announced it)
    }
  };

  bool matches_cache(const OpRequest& r, const OpResponse& cached) const;
  void evict(size_t slot);
  void insert_cache(const OpResponse& response);
  OpResponse resolve(const std::string& name, const Entry& e) const;
  void check_joined(OpResponse* r) const;

  int rank_;
  int size_;
  size_t capacity_;
  std::map<std::string, Local> local_;
  std::vector<OpRequest> internal_;
  std::vector<Slot> slots_;
  std::map<std::string, size_t> slot_of_;
  uint64_t use_counter_ = 0;
  std::map<std::string, Entry> table_;
  std::vector<bool> joined_;
  int last_joined_ = -1;
  bool pending_join_ = false;
  bool rerun_ = false;             // joins changed: requests held by slot need another round
  size_t round_slot_count_ = 0;   // slots this round's control vector covers
};

}  // namespace kolo
