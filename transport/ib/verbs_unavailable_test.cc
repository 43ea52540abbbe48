// A process whose libibverbs cannot be loaded (as on a machine without
// rdma-core's libibverbs1): KOLO_IBVERBS_LIBRARY names a file that does not
// exist, set before anything loads the library. Device discovery finds no
// device and reports no error, exactly as on a machine without RDMA
// hardware; opening the transport (what KOLO_TRANSPORT=ib demands) fails
// UNSUPPORTED saying the library could not be loaded and what to install.
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "transport/ib/device.h"
#include "transport/ib/device_context.h"
#include "transport/ib/ib_transport.h"
#include "transport/ib/verbs_library.h"

namespace kolo {
namespace {

constexpr const char* kMissing = "/nonexistent/libibverbs.so.1";

// Before main, so before any test (in any order or shard) loads the library.
const bool kLibraryHidden = [] { return ::setenv("KOLO_IBVERBS_LIBRARY", kMissing, 1) == 0; }();

void expect_names_the_library(const Status& s) {
  EXPECT_EQ(s.code(), Code::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find(std::string(kMissing) + " could not be loaded ("), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("install rdma-core's libibverbs1"), std::string::npos) << s.message();
}

TEST(VerbsUnavailable, TheLibraryIsNotLoadedAndSaysWhy) {
  ASSERT_TRUE(kLibraryHidden);
  const VerbsLibrary& lib = VerbsLibrary::get();
  EXPECT_FALSE(lib.loaded());
  EXPECT_EQ(lib.file(), kMissing);
  expect_names_the_library(lib.status());
}

TEST(VerbsUnavailable, DiscoveryFindsNoDeviceAndNoError) {
  std::vector<IbDeviceInfo> devices = {{"stale", {}}};
  Status s = query_ib_devices(&devices);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  EXPECT_TRUE(devices.empty());
  // What the transport registry then hears: no device, so TCP.
  IbChoice choice;
  EXPECT_EQ(choose_ib_port(devices, IbSettings{}, &choice).code(), Code::kUnsupported);
}

TEST(VerbsUnavailable, OpeningTheTransportSaysTheLibraryCouldNotBeLoaded) {
  std::unique_ptr<IbTransport> t;
  // The check comes before the store is touched.
  Status s = IbTransport::create(nullptr, 0, 2, IbOptions{}, &t);
  EXPECT_EQ(t, nullptr);
  expect_names_the_library(s);
  EXPECT_EQ(s.message().rfind("no RDMA device: ", 0), 0u) << s.message();
  // An override naming a device changes nothing: there is no library to ask.
  IbOptions named;
  named.settings.device = "rxe0";
  expect_names_the_library(IbTransport::create(nullptr, 0, 2, named, &t));
}

TEST(VerbsUnavailable, OpeningADeviceContextSaysTheLibraryCouldNotBeLoaded) {
  std::shared_ptr<IbDeviceContext> context;
  expect_names_the_library(IbDeviceContext::get("rxe0", &context));
  EXPECT_EQ(context, nullptr);
  EXPECT_EQ(IbDeviceContext::open_count(), 0);
}

}  // namespace
}  // namespace kolo
