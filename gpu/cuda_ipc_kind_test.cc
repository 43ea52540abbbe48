// Which peers' GPUs are reached over CUDA IPC: chosen from the rendezvous
// facts like the host transports, so both ends of a pair agree: ranks of
// one host that both allow it (KOLO_CUDA_IPC); never another host; and
// never a host route (KOLO_TRANSPORT cannot name it); it opens over another
// transport (open_over), where the host kinds open on their own.
#include <gtest/gtest.h>

#include "transport/kind.h"
#include "transport/routes.h"

namespace kolo {
namespace {

RankFacts on(const std::string& host, bool ipc) {
  RankFacts f;
  f.host = host + "/boot";
  f.offers["tcp"] = "";
  if (ipc) f.offers["cuda_ipc"] = "1";
  return f;
}

std::string name_of(const TransportKind* kind) { return kind ? kind->name() : "staged"; }

TEST(CudaIpcKind, BothEndsOfOneHostThatAllowIt) {
  const std::vector<RankFacts> facts = {on("a", true), on("a", true), on("a", false), on("b", true)};
  for (int r = 0; r < 4; ++r) {
    const auto mine = choose_device_routes(facts, r);
    for (int q = 0; q < 4; ++q) {
      if (q == r) {
        EXPECT_EQ(mine[q], nullptr);
        continue;
      }
      EXPECT_EQ(mine[q], choose_device_routes(facts, q)[r]) << r << " and " << q << " disagree";
    }
  }
  const auto routes = choose_device_routes(facts, 0);
  EXPECT_EQ(name_of(routes[1]), "cuda_ipc");
  EXPECT_EQ(name_of(routes[2]), "staged");  // KOLO_CUDA_IPC=0 there
  EXPECT_EQ(name_of(routes[3]), "staged");  // another host
}

TEST(CudaIpcKind, OffersWhatTheSettingAllowsAndIsNoHostRoute) {
  const TransportKind* ipc = find_transport_kind("cuda_ipc");
  ASSERT_NE(ipc, nullptr);
  TransportContext context;
  std::string offer;
  std::unique_ptr<DirectTransport> opened;
  EXPECT_TRUE(ipc->offer(context, &offer, &opened).is_ok());  // on by default
  context.settings.set("KOLO_CUDA_IPC", "0");
  EXPECT_EQ(ipc->offer(context, &offer, &opened).code(), Code::kUnsupported);
  Routes routes;
  const std::vector<RankFacts> facts = {on("a", true), on("a", true)};
  ASSERT_TRUE(choose_routes(facts, 0, "auto", &routes).is_ok());
  EXPECT_EQ(name_of(routes.kind[1]), "tcp");
  EXPECT_EQ(choose_routes(facts, 0, "cuda_ipc", &routes).code(), Code::kInvalidUsage);
}

TEST(CudaIpcKind, OpensOverAnotherTransportWhereHostKindsOpenAlone) {
  const TransportKind* ipc = find_transport_kind("cuda_ipc");
  ASSERT_NE(ipc, nullptr);
  std::unique_ptr<Transport> out;
  EXPECT_EQ(ipc->open_over(nullptr, nullptr, {false, true}, &out).code(), Code::kInvalidArgument);
  EXPECT_EQ(out, nullptr);
  std::unique_ptr<DirectTransport> direct;
  EXPECT_EQ(ipc->open(TransportContext{}, &direct).code(), Code::kUnsupported);
  for (const TransportKind* kind : transport_kinds()) {
    if (kind->carries() != TransportKind::Carries::kHostMemory) continue;
    EXPECT_EQ(kind->open_over(nullptr, nullptr, {}, &out).code(), Code::kUnsupported) << kind->name();
  }
}

}  // namespace
}  // namespace kolo
