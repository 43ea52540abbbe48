// Which transport a communicator takes: with KOLO_TRANSPORT=auto, per peer,
// shared memory to a rank on this machine, else RDMA where both ends can
// open a device, else TCP; KOLO_TRANSPORT forces one (ib needs an active
// device or fails saying there is none). Hosts are emulated in one process
// by Config::host_name. Run on the TCP-only machines and, in the RDMA
// suite, inside the soft-RoCE VM.
#include <chrono>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

#include "collectives/dtype.h"
#include "runtime/config.h"
#include "transport/kind.h"
#include "tests/thread_world.h"
#include "transport/memory_store.h"
#include "transport/ib/device.h"

namespace kolo {
namespace {

// Whether one host's ranks can share memory here (a /dev/shm with room).
bool machine_has_shm() {
  std::string offer;
  std::unique_ptr<DirectTransport> unused;
  return find_transport_kind("shm")->offer(TransportContext{}, &offer, &unused).is_ok() &&
         std::stoull(offer) >= (64u << 20);
}

bool machine_has_rdma() {
  std::vector<IbDeviceInfo> devices;
  IbChoice choice;
  return query_ib_devices(&devices).is_ok() && choose_ib_port(devices, IbSettings{}, &choice).is_ok();
}

void expect_allreduce_works(const std::vector<Communicator*>& comms) {
  const int n = static_cast<int>(comms.size());
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::vector<float> x = {1, 2, static_cast<float>(r)}, y(3);
      ASSERT_TRUE(comms[r]
                      ->allreduce(x.data(), y.data(), 3, DataType::kFloat32,
                                  ReduceOp::kSum)
                      .is_ok());
      EXPECT_EQ(y[1], 2.0f * n);
      EXPECT_EQ(y[2], n * (n - 1) / 2.0f);
    });
  }
  for (auto& t : threads) t.join();
}

// n ranks as threads, rank r with configuration config_of(r).
struct Job {
  MemoryStore store;  // outlives the communicators
  std::vector<std::unique_ptr<Communicator>> comms;
  std::vector<Communicator*> raw() const {
    std::vector<Communicator*> out;
    for (const auto& c : comms) out.push_back(c.get());
    return out;
  }
};

std::unique_ptr<Job> start(int n, const std::function<Config(int)>& config_of) {
  auto job = std::make_unique<Job>();
  job->comms.resize(n);
  std::vector<Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back(
        [&, r] { status[r] = Communicator::create_with_store(r, n, &job->store, config_of(r), &job->comms[r]); });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_TRUE(status[r].is_ok()) << "rank " << r << ": " << status[r].to_string();
  return job;
}

TEST(TransportChoice, AutoTakesSharedMemoryOnOneMachine) {
  Config c = test_config();
  c.transport = "auto";
  ThreadWorld world(3, c);
  // Without a usable /dev/shm, the next transport of the registry.
  const char* want = machine_has_shm() ? "shm" : machine_has_rdma() ? "ib" : "tcp";
  for (int r = 0; r < 3; ++r) EXPECT_STREQ(world.comm(r).transport_name(), want);
  EXPECT_STREQ(world.comm(0).allreduce_algorithm(1 << 20), machine_has_shm() ? "shared_memory" : "ring");
  expect_allreduce_works({&world.comm(0), &world.comm(1), &world.comm(2)});
}

TEST(TransportChoice, AutoChoosesPerPeerAcrossHosts) {
  // Two emulated hosts of two ranks: shared memory within each, and RDMA
  // (where the machine has it) or TCP between them, in one transport.
  auto job = start(4, [](int r) {
    Config c = test_config();
    c.transport = "auto";
    c.host_name = r < 2 ? "host-a" : "host-b";
    // Links between hosts as 10 Gbit/s Ethernet's, whatever carries them
    // here: over RDMA's defaults the cost model rightly prefers the flat
    // ring at this size.
    c.link_costs = "remote=30/1.25";
    return c;
  });
  const std::string across = machine_has_rdma() ? "ib" : "tcp";
  const std::string want = machine_has_shm() ? "shm+" + across : across;
  for (int r = 0; r < 4; ++r) ASSERT_NE(job->comms[r], nullptr) << "rank " << r;
  for (int r = 0; r < 4; ++r) ASSERT_EQ(job->comms[r]->transport_name(), want) << "rank " << r;
  EXPECT_STREQ(job->comms[0]->allreduce_algorithm(1 << 20), "hierarchical");
  expect_allreduce_works(job->raw());
}

TEST(TransportChoice, TheCostModelKnowsEachClassOfLinkAndEveryRankEstimatesAlike) {
  // Four emulated hosts of one rank over TCP, the links between them
  // configured as 1 Gbit/s: the large allreduce is the ring's, and its
  // estimate the bytes each link must carry at that speed, on every rank.
  auto job = start(4, [](int r) {
    Config c = test_config(4096, 64 << 10);
    c.transport = "tcp";
    c.host_name = "host-" + std::to_string(r);
    c.link_costs = "remote=50/0.125";
    return c;
  });
  for (int r = 0; r < 4; ++r) ASSERT_NE(job->comms[r], nullptr) << "rank " << r;
  const size_t big = size_t(64) << 20;
  double first = 0;
  for (int r = 0; r < 4; ++r) {
    double seconds = 0;
    const char* name = nullptr;
    ASSERT_TRUE(job->comms[r]->estimate("allreduce", big, &seconds, &name).is_ok());
    EXPECT_STREQ(name, "ring");
    const double bound = 2.0 * 3 / 4 * double(big) / 0.125e9;
    EXPECT_GT(seconds, bound);
    EXPECT_LT(seconds, 1.1 * bound);
    if (r == 0) first = seconds;
    EXPECT_EQ(seconds, first) << "rank " << r;
    ASSERT_TRUE(job->comms[r]->estimate("allreduce", 8, &seconds, &name).is_ok());
    EXPECT_STREQ(name, "recursive_doubling");
    EXPECT_GT(seconds, 2 * 50e-6);  // two exchanges across hosts
  }
  // Broadcast (the pipelined chain around the ring, across hosts) and
  // pairwise all-to-all, each bounded below by what the busiest link
  // carries.
  double chain = 0, pairwise = 0;
  const char* name = nullptr;
  ASSERT_TRUE(job->comms[0]->estimate("broadcast", big, &chain, &name).is_ok());
  EXPECT_STREQ(name, "ring");
  EXPECT_GT(chain, double(big) / 0.125e9);
  ASSERT_TRUE(job->comms[0]->estimate("alltoall", big, &pairwise, &name).is_ok());
  EXPECT_STREQ(name, "pairwise");
  EXPECT_GT(pairwise, 3.0 / 4 * double(big) / 0.125e9);
  EXPECT_EQ(job->comms[0]->estimate("all_to_all", 8, nullptr, nullptr).code(), Code::kInvalidArgument);
  expect_allreduce_works(job->raw());
}

TEST(TransportChoice, AutoFallsBackToTcpWhereOneEndCannotUseRdma) {
  // Three hosts; rank 2 names a device that does not exist, so it cannot
  // open RDMA, and a queue pair needs both ends: ranks 0 and 1 reach it
  // over TCP (and each other over RDMA where the machine has it).
  auto job = start(3, [](int r) {
    Config c = test_config();
    c.transport = "auto";
    c.host_name = "host-" + std::to_string(r);
    if (r == 2) c.ib_device = "no-such-device";
    return c;
  });
  for (int r = 0; r < 3; ++r) ASSERT_NE(job->comms[r], nullptr) << "rank " << r;
  EXPECT_STREQ(job->comms[2]->transport_name(), "tcp");
  for (int r = 0; r < 2; ++r) EXPECT_STREQ(job->comms[r]->transport_name(), machine_has_rdma() ? "ib+tcp" : "tcp");
  expect_allreduce_works(job->raw());
}

TEST(TransportChoice, RanksThatRunAllreduceDifferentlyFailWithMismatch) {
  // One rank keeps the ring (KOLO_ALGORITHM=ring), the other takes the
  // shared-memory allreduce: their first messages tell them apart.
  ThreadWorld world(2, [](int r) {
    Config c = test_config();
    c.transport = "auto";
    c.algorithm = r == 0 ? "ring" : "auto";
    return c;
  });
  const auto start = std::chrono::steady_clock::now();
  world.run([&](int r) {
    std::vector<float> x(1 << 18, 1.0f), y(x.size());
    Status s = world.comm(r).allreduce(x.data(), y.data(), x.size(), DataType::kFloat32,
                                       ReduceOp::kSum);
    EXPECT_EQ(s.code(), Code::kMismatch) << "rank " << r << ": " << s.to_string();
  });
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(TransportChoice, ForcedSharedMemoryAcrossHostsNamesTheRank) {
  const int n = 3;
  MemoryStore store;
  std::vector<std::unique_ptr<Communicator>> comms(n);
  std::vector<Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      Config c = test_config();
      c.transport = "shm";
      c.timeout_s = 10;
      c.host_name = r < 2 ? "host-a" : "host-b";
      status[r] = Communicator::create_with_store(r, n, &store, c, &comms[r]);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(status[0].code(), Code::kInvalidUsage);
  EXPECT_EQ(status[0].message(), "KOLO_TRANSPORT=shm cannot reach rank 2: another machine");
  EXPECT_EQ(status[2].message(), "KOLO_TRANSPORT=shm cannot reach rank 0: another machine");
}

TEST(TransportChoice, DemandingRdmaWithoutADeviceFailsClearly) {
  if (machine_has_rdma()) {
    Config c = test_config();
    c.transport = "ib";
    ThreadWorld world(2, c);
    EXPECT_STREQ(world.comm(1).transport_name(), "ib");
    return;
  }
  Config c = test_config();
  c.transport = "ib";
  MemoryStore store;
  std::unique_ptr<Communicator> comm;
  Status s = Communicator::create_with_store(0, 2, &store, c, &comm);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("KOLO_TRANSPORT=ib"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("no RDMA device"), std::string::npos) << s.message();
}

TEST(TransportChoice, TcpIsAlwaysAvailable) {
  Config c = test_config();
  c.transport = "tcp";
  ThreadWorld world(3, c);
  for (int r = 0; r < 3; ++r) EXPECT_STREQ(world.comm(r).transport_name(), "tcp");
}

TEST(TransportChoice, UnknownTransportsAreRejected) {
  setenv("KOLO_TRANSPORT", "carrier-pigeon", 1);
  Config c;
  Status s = load_config(&c);
  unsetenv("KOLO_TRANSPORT");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("KOLO_TRANSPORT='carrier-pigeon': use auto, shm, ib or tcp"), std::string::npos);
}

}  // namespace
}  // namespace kolo
