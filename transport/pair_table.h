// A transport's connected pairs, by peer rank, kept as every transport
// keeps them: found on the collective's thread, walked by abort() and by
// event handlers on other threads, so one mutex guards the table (each
// pair's own state is the pair's business). A lookup of a peer with no pair
// is INVALID_USAGE naming both ranks and the transport.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/status.h"

namespace kolo {

template <typename Pair>
class PairTable {
 public:
  // transport: how errors name it ("TCP", "RDMA").
  explicit PairTable(std::string transport) : transport_(std::move(transport)) {}

  bool contains(int peer) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return pairs_.count(peer) != 0;
  }
  // nullptr when there is no pair to `peer`.
  Pair* find(int peer) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = pairs_.find(peer);
    return it == pairs_.end() ? nullptr : it->second.get();
  }
  Status lookup(int peer, int rank, Pair** out) const { return found(find(peer), peer, rank, out); }
  // lookup() without the lock, for the hot path of callers that every add()
  // happens before or after, never during: a transport's collective calls
  // (posts, peeks), which run one at a time with its connect(), the only
  // caller of add(). Other threads only read the table, so this read races
  // with nothing.
  Status lookup_from_collective(int peer, int rank, Pair** out) const {
    auto it = pairs_.find(peer);
    return found(it == pairs_.end() ? nullptr : it->second.get(), peer, rank, out);
  }
  // Adds the pair unless `refuse`, asked under the table's lock, gives a
  // reason not to (an abort that raced with the connection): a walk of the
  // table by abort() then either sees the new pair or is seen by `refuse`.
  Status add(int peer, std::unique_ptr<Pair> pair, const std::function<Status(Pair&)>& refuse = nullptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (refuse) KOLO_RETURN_IF_ERROR(refuse(*pair));
    pairs_[peer] = std::move(pair);
    return Status::ok();
  }
  // Every pair in rank order, under the lock; the first error ends the walk.
  Status for_each(const std::function<Status(int, Pair&)>& fn) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& entry : pairs_) KOLO_RETURN_IF_ERROR(fn(entry.first, *entry.second));
    return Status::ok();
  }
  // Whether `fn` holds for some pair (stops at the first).
  bool any(const std::function<bool(Pair&)>& fn) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& entry : pairs_) {
      if (fn(*entry.second)) return true;
    }
    return false;
  }
  void clear() {
    std::map<int, std::unique_ptr<Pair>> gone;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      gone.swap(pairs_);
    }
  }

 private:
  Status found(Pair* pair, int peer, int rank, Pair** out) const {
    *out = pair;
    if (pair) return Status::ok();
    return invalid_usage("rank " + std::to_string(peer) + " is not connected to rank " + std::to_string(rank) +
                         " over " + transport_);
  }

  std::string transport_;
  mutable std::mutex mutex_;
  std::map<int, std::unique_ptr<Pair>> pairs_;
};

}  // namespace kolo
