#include "transport/ib/registration_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "transport/ib/fake_registration_backend.h"

namespace kolo {
namespace {

using FakeBackend = FakeRegistrationBackend;

constexpr size_t kPage = 4096;

struct Memory {
  alignas(4096) char bytes[16 * kPage];
  char* page(int i) { return bytes + i * kPage; }
};

// Each test: a fake NIC, some pages of memory, and a cache over them.
class RegistrationCacheTest : public ::testing::Test {
 protected:
  FakeBackend backend;
  Memory m;
  RegistrationCache cache{&backend};
};

TEST_F(RegistrationCacheTest, RegistersTheDeclaredBytesOnceAndEveryMessageInsideReusesThem) {
  ASSERT_TRUE(cache.add(m.page(1) + 100, 5000).is_ok());
  ASSERT_TRUE(cache.add(m.page(1) + 100, 5000).is_ok());  // declared twice: registered once
  EXPECT_EQ(cache.stats().registrations, 1u);
  RegistrationCache::Pin p;
  ASSERT_TRUE(cache.find(m.page(1) + 100, 5000, &p));
  const MemoryRegion& r = RegistrationCache::region(p);
  // Exactly what was declared: device memory must not be registered past
  // its allocation.
  EXPECT_EQ(r.addr, reinterpret_cast<uintptr_t>(m.page(1) + 100));
  EXPECT_EQ(r.length, 5000u);
  // Any part of the declared bytes hits; the steady state registers nothing.
  for (int i = 0; i < 100; ++i) {
    RegistrationCache::Pin q;
    ASSERT_TRUE(cache.find(m.page(1) + 3000, 2000, &q));
    EXPECT_EQ(RegistrationCache::region(q).lkey, r.lkey);
  }
  EXPECT_EQ(cache.stats().registrations, 1u);
  EXPECT_EQ(cache.stats().hits, 101u);
}

TEST_F(RegistrationCacheTest, MemoryNotDeclaredIsAMissNotARegistration) {
  ASSERT_TRUE(cache.add(m.page(1) + 100, 1000).is_ok());
  RegistrationCache::Pin p;
  // On the registered page but outside the declared bytes: kolo was not
  // given that memory, so it does not use the registration for it.
  EXPECT_FALSE(cache.find(m.page(1), 100, &p));
  EXPECT_FALSE(cache.find(m.page(1) + 1000, 101, &p));  // runs past the end
  EXPECT_FALSE(cache.find(m.page(5), 10, &p));
  EXPECT_FALSE(p);
  EXPECT_EQ(cache.stats().misses, 3u);
  EXPECT_EQ(cache.stats().registrations, 1u);
}

TEST_F(RegistrationCacheTest, OverlappingDeclarationsAreBothFound) {
  ASSERT_TRUE(cache.add(m.page(0), 8 * kPage).is_ok());  // large, starts first
  ASSERT_TRUE(cache.add(m.page(2), 10).is_ok());         // small, inside it
  RegistrationCache::Pin p;
  ASSERT_TRUE(cache.find(m.page(2) + 100, kPage, &p));   // only the large one covers this
  EXPECT_EQ(RegistrationCache::region(p).length, 8 * kPage);
}

TEST_F(RegistrationCacheTest, InvalidatedMemoryIsForgottenAndPinsStayValid) {
  ASSERT_TRUE(cache.add(m.page(3), 2 * kPage).is_ok());
  ASSERT_TRUE(cache.add(m.page(8), kPage).is_ok());
  RegistrationCache::Pin in_flight, other;
  ASSERT_TRUE(cache.find(m.page(3), kPage, &in_flight));
  ASSERT_TRUE(cache.find(m.page(8), 1, &other));
  const uint32_t old_key = RegistrationCache::region(in_flight).lkey;
  // The owner frees memory overlapping the first declaration: it goes from the cache...
  cache.invalidate(m.page(4) + 10, 1);
  EXPECT_EQ(cache.size(), 1u);
  RegistrationCache::Pin p;
  EXPECT_FALSE(cache.find(m.page(3), 10, &p));
  // ...but is deregistered only when the message using it lets go.
  EXPECT_EQ(backend.live.count(old_key), 1u);
  in_flight.reset();
  EXPECT_EQ(backend.live.count(old_key), 0u);
  // The same address declared again gets a registration of its own.
  ASSERT_TRUE(cache.add(m.page(3), kPage).is_ok());
  ASSERT_TRUE(cache.find(m.page(3), kPage, &p));
  EXPECT_NE(RegistrationCache::region(p).lkey, old_key);
  // Memory elsewhere was untouched.
  EXPECT_EQ(backend.live.count(RegistrationCache::region(other).lkey), 1u);
}

TEST_F(RegistrationCacheTest, AFailedRegistrationCachesNothing) {
  backend.fail_next = true;
  Status s = cache.add(m.page(0), 10);
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_EQ(cache.size(), 0u);
  RegistrationCache::Pin p;
  EXPECT_FALSE(cache.find(m.page(0), 10, &p));
  EXPECT_EQ(cache.add(nullptr, 10).code(), Code::kInvalidArgument);
  EXPECT_EQ(cache.add(m.page(0), 0).code(), Code::kInvalidArgument);
}

TEST(RegistrationCache, DestroyingTheCacheDeregistersEverything) {
  FakeBackend backend;
  Memory m;
  {
    RegistrationCache cache(&backend);
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(cache.add(m.page(2 * i), 1).is_ok());
    EXPECT_EQ(backend.live.size(), 5u);
  }
  EXPECT_TRUE(backend.live.empty());
}

}  // namespace
}  // namespace kolo
