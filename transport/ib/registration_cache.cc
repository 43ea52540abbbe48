#include "transport/ib/registration_cache.h"

namespace kolo {

struct RegistrationCache::Entry {
  MemoryRegion region;
  std::list<Entry*>::iterator lru_pos;
};

RegistrationCache::RegistrationCache(RegistrationBackend* backend, size_t max_entries, size_t page_size)
    : backend_(backend), max_entries_(max_entries), page_size_(page_size) {}

RegistrationCache::~RegistrationCache() {
  while (!by_addr_.empty()) forget(by_addr_.begin());
}

const MemoryRegion& RegistrationCache::region(const Pin& pin) { return pin->region; }

Status RegistrationCache::acquire(const void* addr, size_t length, Pin* pin) {
  if (addr == nullptr || length == 0) return invalid_argument("cannot register an empty buffer");
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  auto it = by_addr_.upper_bound(a);
  if (it != by_addr_.begin()) {
    --it;
    Entry& e = *it->second;
    if (e.region.addr <= a && a + length <= e.region.addr + e.region.length) {
      ++stats_.hits;
      lru_.splice(lru_.begin(), lru_, e.lru_pos);
      *pin = it->second;
      return Status::ok();
    }
  }
  // Whole pages: the NIC pins pages anyway, and a neighbouring buffer on
  // the same pages then hits.
  const uintptr_t start = a & ~(static_cast<uintptr_t>(page_size_) - 1);
  const uintptr_t end = (a + length + page_size_ - 1) & ~(static_cast<uintptr_t>(page_size_) - 1);
  MemoryRegion r;
  KOLO_RETURN_IF_ERROR(backend_->register_memory(start, end - start, &r));
  ++stats_.registrations;
  // The deregistration happens when the last holder (the cache or a pin) lets go.
  Pin entry(new Entry{r, {}}, [this](Entry* e) {
    backend_->deregister(e->region);
    ++stats_.deregistrations;
    delete e;
  });
  *pin = entry;
  if (max_entries_ == 0) return Status::ok();  // the pin is the only holder
  auto same = by_addr_.find(start);
  if (same != by_addr_.end()) forget(same);  // a smaller registration at the same start
  lru_.push_front(entry.get());
  entry->lru_pos = lru_.begin();
  by_addr_[start] = entry;
  evict_over_capacity();
  return Status::ok();
}

void RegistrationCache::invalidate(const void* addr, size_t length) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  // Registrations may overlap one another, so every one is checked; there
  // are at most max_entries and freeing is rare next to acquiring.
  for (auto it = by_addr_.begin(); it != by_addr_.end() && it->first < a + length;) {
    const MemoryRegion& r = it->second->region;
    auto next = std::next(it);
    if (r.addr + r.length > a) forget(it);
    it = next;
  }
}

void RegistrationCache::evict_over_capacity() {
  // Least recently used first; registrations pinned by operations in
  // flight stay (the cache may exceed its count until they are released).
  auto it = lru_.end();
  while (by_addr_.size() > max_entries_ && it != lru_.begin()) {
    --it;
    auto entry = by_addr_.find((*it)->region.addr);
    if (entry->second.use_count() > 1) continue;
    auto after = std::next(it);  // stays valid when forget() erases it
    forget(entry);
    it = after;
  }
}

void RegistrationCache::forget(std::map<uintptr_t, Pin>::iterator it) {
  Entry* e = it->second.get();
  lru_.erase(e->lru_pos);
  by_addr_.erase(it);  // deregisters now unless a pin still holds it
}

}  // namespace kolo
