#include "transport/ib/registration_cache.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace kolo {
namespace {

// Records what is registered; the keys count up so each registration is distinct.
class FakeBackend : public RegistrationBackend {
 public:
  Status register_memory(uintptr_t addr, size_t length, MemoryRegion* out) override {
    if (fail_next) {
      fail_next = false;
      return transport_error("ibv_reg_mr: Cannot allocate memory");
    }
    out->addr = addr;
    out->length = length;
    out->lkey = out->rkey = ++next_key;
    live.insert(out->lkey);
    return Status::ok();
  }
  void deregister(const MemoryRegion& r) override {
    EXPECT_EQ(live.erase(r.lkey), 1u) << "deregistered twice or never registered";
  }
  std::set<uint32_t> live;
  uint32_t next_key = 0;
  bool fail_next = false;
};

constexpr size_t kPage = 4096;

struct Memory {
  alignas(4096) char bytes[16 * kPage];
  char* page(int i) { return bytes + i * kPage; }
};

TEST(RegistrationCache, RegistersWholePagesOnceAndReusesThem) {
  FakeBackend backend;
  Memory m;
  RegistrationCache cache(&backend, 8);
  RegistrationCache::Pin p1, p2, p3;
  ASSERT_TRUE(cache.acquire(m.page(1) + 100, 5000, &p1).is_ok());
  const MemoryRegion& r = RegistrationCache::region(p1);
  EXPECT_EQ(r.addr, reinterpret_cast<uintptr_t>(m.page(1)));
  EXPECT_EQ(r.length, 2 * kPage);
  // Any part of those pages hits; the steady state registers nothing.
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(cache.acquire(m.page(1) + 3000, 4000, &p2).is_ok());
  EXPECT_EQ(RegistrationCache::region(p2).lkey, r.lkey);
  EXPECT_EQ(cache.stats().registrations, 1u);
  EXPECT_EQ(cache.stats().hits, 100u);
  // Past the end: a new registration.
  ASSERT_TRUE(cache.acquire(m.page(2), kPage + 1, &p3).is_ok());
  EXPECT_NE(RegistrationCache::region(p3).lkey, r.lkey);
  EXPECT_EQ(backend.live.size(), 2u);
}

TEST(RegistrationCache, EvictsTheLeastRecentlyUsedButNeverAPinnedOne) {
  FakeBackend backend;
  Memory m;
  RegistrationCache cache(&backend, 2);
  RegistrationCache::Pin held, tmp;
  ASSERT_TRUE(cache.acquire(m.page(0), 1, &held).is_ok());  // pinned throughout
  ASSERT_TRUE(cache.acquire(m.page(2), 1, &tmp).is_ok());
  const uint32_t second = RegistrationCache::region(tmp).lkey;
  tmp.reset();
  ASSERT_TRUE(cache.acquire(m.page(4), 1, &tmp).is_ok());
  tmp.reset();
  // Over capacity: page 2's registration (unpinned, least recent) went; page 0's (pinned) stayed.
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(backend.live.count(second), 0u);
  EXPECT_EQ(backend.live.count(RegistrationCache::region(held).lkey), 1u);
  // Using page 0 again hits.
  ASSERT_TRUE(cache.acquire(m.page(0), 10, &tmp).is_ok());
  EXPECT_EQ(RegistrationCache::region(tmp).lkey, RegistrationCache::region(held).lkey);
}

TEST(RegistrationCache, InvalidatedMemoryIsRegisteredAfreshAndPinsStayValid) {
  FakeBackend backend;
  Memory m;
  RegistrationCache cache(&backend, 8);
  RegistrationCache::Pin in_flight, other, again;
  ASSERT_TRUE(cache.acquire(m.page(3), 2 * kPage, &in_flight).is_ok());
  ASSERT_TRUE(cache.acquire(m.page(8), kPage, &other).is_ok());
  const uint32_t old_key = RegistrationCache::region(in_flight).lkey;
  // The owner frees one byte of page 4: the registration spanning it goes from the cache...
  cache.invalidate(m.page(4) + 10, 1);
  EXPECT_EQ(cache.size(), 1u);
  // ...but is deregistered only when the operation using it lets go.
  EXPECT_EQ(backend.live.count(old_key), 1u);
  in_flight.reset();
  EXPECT_EQ(backend.live.count(old_key), 0u);
  // The same address now gets a registration of its own.
  ASSERT_TRUE(cache.acquire(m.page(3), kPage, &again).is_ok());
  EXPECT_NE(RegistrationCache::region(again).lkey, old_key);
  // Memory elsewhere was untouched.
  EXPECT_EQ(backend.live.count(RegistrationCache::region(other).lkey), 1u);
}

TEST(RegistrationCache, AFailedRegistrationCachesNothing) {
  FakeBackend backend;
  Memory m;
  RegistrationCache cache(&backend, 8);
  RegistrationCache::Pin p;
  backend.fail_next = true;
  Status s = cache.acquire(m.page(0), 10, &p);
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_FALSE(p);
  EXPECT_EQ(cache.acquire(nullptr, 10, &p).code(), Code::kInvalidArgument);
  EXPECT_EQ(cache.acquire(m.page(0), 0, &p).code(), Code::kInvalidArgument);
}

TEST(RegistrationCache, CapacityZeroRegistersPerUse) {
  FakeBackend backend;
  Memory m;
  RegistrationCache cache(&backend, 0);
  RegistrationCache::Pin a, b;
  ASSERT_TRUE(cache.acquire(m.page(0), 10, &a).is_ok());
  ASSERT_TRUE(cache.acquire(m.page(0), 10, &b).is_ok());
  EXPECT_NE(RegistrationCache::region(a).lkey, RegistrationCache::region(b).lkey);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(backend.live.size(), 2u);
  a.reset();
  b.reset();
  EXPECT_TRUE(backend.live.empty());
}

TEST(RegistrationCache, DestroyingTheCacheDeregistersEverything) {
  FakeBackend backend;
  Memory m;
  {
    RegistrationCache cache(&backend, 8);
    RegistrationCache::Pin p;
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(cache.acquire(m.page(2 * i), 1, &p).is_ok());
    p.reset();
    EXPECT_EQ(backend.live.size(), 5u);
  }
  EXPECT_TRUE(backend.live.empty());
}

}  // namespace
}  // namespace kolo
