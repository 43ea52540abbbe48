// A registration backend for tests: records what is registered, with keys
// that count up so each registration is distinct, and checks that every
// deregistration matches a live registration.
#pragma once

#include <gtest/gtest.h>

#include <set>

#include "transport/ib/registration_cache.h"

namespace kolo {

class FakeRegistrationBackend : public RegistrationBackend {
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

  std::set<uint32_t> live;  // keys registered and not deregistered
  uint32_t next_key = 0;
  bool fail_next = false;  // the next registration fails
};

}  // namespace kolo
