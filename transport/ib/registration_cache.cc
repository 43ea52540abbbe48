#include "transport/ib/registration_cache.h"

namespace kolo {

struct RegistrationCache::Entry {
  MemoryRegion region;  // exactly the bytes the owner declared
};

RegistrationCache::RegistrationCache(RegistrationBackend* backend) : backend_(backend) {}

RegistrationCache::~RegistrationCache() { by_addr_.clear(); }

const MemoryRegion& RegistrationCache::region(const Pin& pin) { return pin->region; }

Status RegistrationCache::add(const void* addr, size_t length) {
  if (addr == nullptr || length == 0) return invalid_argument("cannot register an empty buffer");
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  auto same = by_addr_.equal_range(a);
  for (auto it = same.first; it != same.second; ++it) {
    if (it->second->region.length == length) return Status::ok();
  }
  // Exactly the declared bytes: lookups go by them, and device memory must
  // not be registered past its allocation (the NIC pins whole pages anyway).
  MemoryRegion r;
  KOLO_RETURN_IF_ERROR(backend_->register_memory(a, length, &r));
  ++stats_.registrations;
  // The deregistration happens when the last holder (the cache or a pin) lets go.
  Pin entry(new Entry{r}, [this](Entry* e) {
    backend_->deregister(e->region);
    ++stats_.deregistrations;
    delete e;
  });
  by_addr_.emplace(a, std::move(entry));
  return Status::ok();
}

bool RegistrationCache::find(const void* addr, size_t length, Pin* pin) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  // Entries are few (the workspace, the fusion buffer, what an application
  // registered) and may overlap: look at every one that starts at or before a.
  for (auto it = by_addr_.upper_bound(a); it != by_addr_.begin();) {
    --it;
    const Entry& e = *it->second;
    if (a + length <= e.region.addr + e.region.length) {
      ++stats_.hits;
      *pin = it->second;
      return true;
    }
  }
  ++stats_.misses;
  return false;
}

void RegistrationCache::invalidate(const void* addr, size_t length) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  for (auto it = by_addr_.begin(); it != by_addr_.end() && it->first < a + length;) {
    const Entry& e = *it->second;
    // Overlap of the declared bytes is what matters: a page the entry
    // shares with the freed memory but does not overlap in declared bytes
    // still holds the entry's live memory, so it stays mapped.
    if (e.region.addr + e.region.length > a) {
      it = by_addr_.erase(it);  // deregisters now unless a pin still holds it
    } else {
      ++it;
    }
  }
}

}  // namespace kolo
