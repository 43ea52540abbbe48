// Memory registered with the NIC for good: registering (pinning pages,
// making keys) costs tens of microseconds to milliseconds, far more than a
// small message, so memory declared long-lived (Transport::register_memory:
// the communicator's workspace, the engine's fusion buffer, buffers an
// application registers through the C API) is registered once and every
// later message inside it reuses that registration, with no copy. Declaring
// its end (invalidate, before the memory is freed or unmapped) forgets every
// registration overlapping it, so a later buffer at the same address can
// never be written through keys that pin the old pages.
//
// kolo is not told when an application frees other memory, so it never
// keeps a registration of memory it was not given this way: such messages
// are staged through StagingRing buffers instead.
//
// A registration in use (pinned by a message in flight) is deregistered only
// after its last release. The backend does the registering (ibv_reg_mr in
// the transport; a fake in tests), so this runs without a device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>

#include "common/status.h"

namespace kolo {

struct MemoryRegion {
  uintptr_t addr = 0;  // first byte registered
  size_t length = 0;   // bytes registered
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
    uint64_t hits = 0;           // messages that found their memory registered
    uint64_t misses = 0;         // ... that did not (and were staged)
    uint64_t registrations = 0;  // backend calls
    uint64_t deregistrations = 0;
  };

  explicit RegistrationCache(RegistrationBackend* backend);
  ~RegistrationCache();  // deregisters everything (no pin may outlive the cache)

  // Registers [addr, addr + length) (host or device memory, as the backend
  // can) until invalidate() covers it. Declaring the same range again does
  // nothing.
  Status add(const void* addr, size_t length);

  // A registration added for memory covering [addr, addr + length),
  // pinned; false when there is none.
  bool find(const void* addr, size_t length, Pin* pin);

  // The memory [addr, addr + length) is about to be freed or unmapped:
  // forget every registration overlapping it.
  void invalidate(const void* addr, size_t length);

  static const MemoryRegion& region(const Pin& pin);
  size_t size() const { return by_addr_.size(); }
  const Stats& stats() const { return stats_; }

 private:
  RegistrationBackend* backend_;
  std::multimap<uintptr_t, Pin> by_addr_;  // by first declared byte
  Stats stats_;
};

}  // namespace kolo
