// Memory registration, cached. Registering memory with the NIC (pinning its
// pages, making keys) costs tens of microseconds to milliseconds, far more
// than a small message, so a buffer is registered once and the registration
// reused by every later operation on any part of it. The cache registers
// whole pages, keeps the most recently used registrations up to a count,
// and drops (deregisters) any that overlap memory the owner is about to free
// or unmap (invalidate), so a later buffer at the same address gets a fresh
// registration of its own pages. A registration in use (pinned by an
// operation in flight) is never deregistered under it: eviction and
// invalidation of a pinned entry wait until its last release.
//
// The backend does the registering (ibv_reg_mr in the transport; a fake in
// tests), so the policy here runs without a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory>

#include "common/status.h"

namespace kolo {

struct MemoryRegion {
  uintptr_t addr = 0;  // first byte registered (page aligned)
  size_t length = 0;   // bytes registered (whole pages)
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  void* handle = nullptr;  // the backend's (struct ibv_mr*)
};

class RegistrationBackend {
 public:
  virtual ~RegistrationBackend() = default;
  virtual Status register_memory(uintptr_t addr, size_t length, MemoryRegion* out) = 0;
  virtual void deregister(const MemoryRegion& region) = 0;
};

class RegistrationCache {
 public:
  struct Entry;
  // A pinned registration: valid until released.
  using Pin = std::shared_ptr<Entry>;

  struct Stats {
    uint64_t hits = 0;
    uint64_t registrations = 0;
    uint64_t deregistrations = 0;
  };

  // max_entries 0: cache nothing (each acquire registers, and the last
  // release deregisters), for memory whose owner gives no notice of frees.
  RegistrationCache(RegistrationBackend* backend, size_t max_entries, size_t page_size = 4096);
  ~RegistrationCache();  // deregisters everything (no pin may outlive the cache)

  // A registration covering [addr, addr + length): a cached one if one
  // does, else a new one of the pages it spans. Pinned until `pin` goes.
  Status acquire(const void* addr, size_t length, Pin* pin);

  // The memory [addr, addr + length) is about to be freed or unmapped:
  // forget every registration overlapping it.
  void invalidate(const void* addr, size_t length);

  static const MemoryRegion& region(const Pin& pin);
  size_t size() const { return by_addr_.size(); }
  const Stats& stats() const { return stats_; }

 private:
  void evict_over_capacity();
  void forget(std::map<uintptr_t, Pin>::iterator it);

  RegistrationBackend* backend_;
  size_t max_entries_;
  size_t page_size_;
  std::map<uintptr_t, Pin> by_addr_;  // cached registrations by first byte
  std::list<Entry*> lru_;             // most recently used first
  Stats stats_;
};

}  // namespace kolo
