// Communicators in a process whose libibverbs cannot be loaded, as on a
// machine without rdma-core's libibverbs1 (KOLO_IBVERBS_LIBRARY names a file
// that does not exist, set before anything loads the library): ranks on
// other hosts are reached over TCP as where there is no RDMA device, with
// nothing said above debug level, and KOLO_TRANSPORT=ib fails saying the
// library could not be loaded and what to install.
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/dtype.h"
#include "common/log.h"
#include "tests/thread_world.h"
#include "transport/memory_store.h"

namespace kolo {
namespace {

constexpr const char* kMissing = "/nonexistent/libibverbs.so.1";

// Before main, so before any test (in any order or shard) loads the library.
const bool kLibraryHidden = [] { return ::setenv("KOLO_IBVERBS_LIBRARY", kMissing, 1) == 0; }();

TEST(WithoutVerbs, OtherHostsAreReachedOverTcpAndNothingIsSaid) {
  ASSERT_TRUE(kLibraryHidden);
  const LogLevel level = log_level();
  set_log_level(LogLevel::kInfo);  // what is said at info and above
  testing::internal::CaptureStderr();
  const int n = 2;
  MemoryStore store;
  std::vector<std::unique_ptr<Communicator>> comms(n);
  std::vector<Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Config c = test_config();
      c.transport = "auto";
      c.host_name = "host-" + std::to_string(r);  // no shared memory between them
      status[r] = Communicator::create_with_store(r, n, &store, c, &comms[r]);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) ASSERT_TRUE(status[r].is_ok()) << "rank " << r << ": " << status[r].to_string();
  threads.clear();
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> x = {1, static_cast<float>(r)}, y(2);
      Status s = comms[r]->allreduce(x.data(), y.data(), 2, DataType::kFloat32,
                                     ReduceOp::kSum);
      EXPECT_TRUE(s.is_ok()) << s.to_string();
      EXPECT_EQ(y[0], 2.0f);
      EXPECT_EQ(y[1], 1.0f);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_STREQ(comms[r]->transport_name(), "tcp");
  comms.clear();
  const std::string said = testing::internal::GetCapturedStderr();
  set_log_level(level);
  EXPECT_EQ(said.find("ibverbs"), std::string::npos) << said;
}

TEST(WithoutVerbs, DemandingRdmaSaysTheLibraryCouldNotBeLoaded) {
  Config c = test_config();
  c.transport = "ib";
  MemoryStore store;
  std::unique_ptr<Communicator> comm;
  Status s = Communicator::create_with_store(0, 2, &store, c, &comm);
  EXPECT_EQ(s.code(), Code::kUnsupported) << s.to_string();
  const std::string want = std::string("KOLO_TRANSPORT=ib: the RDMA transport: no RDMA device: ") + kMissing +
                           " could not be loaded (";
  EXPECT_EQ(s.message().rfind(want, 0), 0u) << s.message();
  EXPECT_NE(s.message().find("install rdma-core's libibverbs1"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kolo
