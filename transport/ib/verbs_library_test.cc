// libibverbs loaded at run time: a file that cannot be opened, or that lacks
// the functions, leaves RDMA unavailable with the reason; the installed
// library (where the machine has one) fills every entry, at the current
// ABI's versions, not the 1.0 compatibility ones.
#include "transport/ib/verbs_library.h"

#include <dlfcn.h>

#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "transport/ib/device.h"

namespace kolo {
namespace {

TEST(VerbsLibrary, AFileThatCannotBeOpenedLeavesRdmaUnavailableAndSaysWhy) {
  const VerbsLibrary lib = VerbsLibrary::load("/nonexistent/libibverbs.so.1");
  EXPECT_FALSE(lib.loaded());
  EXPECT_EQ(lib.status().code(), Code::kUnsupported);
  const std::string& m = lib.status().message();
  EXPECT_EQ(m.rfind("/nonexistent/libibverbs.so.1 could not be loaded (", 0), 0u) << m;
  // dlerror's own words, in the parentheses.
  EXPECT_NE(m.find("No such file or directory"), std::string::npos) << m;
  EXPECT_NE(m.find("install rdma-core's libibverbs1"), std::string::npos) << m;
  EXPECT_EQ(lib.get_device_list, nullptr);
  EXPECT_EQ(lib.reg_dmabuf_mr, nullptr);
}

TEST(VerbsLibrary, ALibraryWithoutTheFunctionsLeavesRdmaUnavailable) {
  const VerbsLibrary lib = VerbsLibrary::load("libc.so.6");
  EXPECT_FALSE(lib.loaded());
  EXPECT_EQ(lib.status().code(), Code::kUnsupported);
  EXPECT_EQ(lib.status().message().rfind("libc.so.6 has no ibv_get_device_list@IBVERBS_1.1", 0), 0u)
      << lib.status().message();
  // No half-filled table.
  EXPECT_EQ(lib.get_device_list, nullptr);
  EXPECT_EQ(lib.wc_status_str, nullptr);
}

TEST(VerbsLibrary, TheInstalledLibraryFillsEveryEntryAtTheCurrentAbi) {
  const VerbsLibrary lib = VerbsLibrary::load("libibverbs.so.1");
  if (!lib.loaded()) GTEST_SKIP() << "no libibverbs here: " << lib.status().message();
  EXPECT_EQ(lib.file(), "libibverbs.so.1");
  for (const void* fn : {reinterpret_cast<const void*>(lib.get_device_list),
                         reinterpret_cast<const void*>(lib.free_device_list),
                         reinterpret_cast<const void*>(lib.get_device_name),
                         reinterpret_cast<const void*>(lib.open_device),
                         reinterpret_cast<const void*>(lib.close_device),
                         reinterpret_cast<const void*>(lib.query_device),
                         reinterpret_cast<const void*>(lib.alloc_pd),
                         reinterpret_cast<const void*>(lib.dealloc_pd),
                         reinterpret_cast<const void*>(lib.reg_mr),
                         reinterpret_cast<const void*>(lib.dereg_mr),
                         reinterpret_cast<const void*>(lib.create_comp_channel),
                         reinterpret_cast<const void*>(lib.destroy_comp_channel),
                         reinterpret_cast<const void*>(lib.create_cq),
                         reinterpret_cast<const void*>(lib.destroy_cq),
                         reinterpret_cast<const void*>(lib.get_cq_event),
                         reinterpret_cast<const void*>(lib.ack_cq_events),
                         reinterpret_cast<const void*>(lib.create_qp),
                         reinterpret_cast<const void*>(lib.destroy_qp),
                         reinterpret_cast<const void*>(lib.modify_qp),
                         reinterpret_cast<const void*>(lib.get_async_event),
                         reinterpret_cast<const void*>(lib.ack_async_event),
                         reinterpret_cast<const void*>(lib.event_type_str),
                         reinterpret_cast<const void*>(lib.wc_status_str)}) {
    EXPECT_NE(fn, nullptr);
  }
  // The functions with a 1.0 compatibility version are bound to 1.1, as a
  // link against the library binds them (the 1.0 ones take old-ABI
  // contexts and crash the current calls).
  void* handle = ::dlopen("libibverbs.so.1", RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  void* compat_open = ::dlvsym(handle, "ibv_open_device", "IBVERBS_1.0");
  void* current_open = ::dlvsym(handle, "ibv_open_device", "IBVERBS_1.1");
  EXPECT_EQ(reinterpret_cast<void*>(lib.open_device), current_open);
  if (compat_open) {
    EXPECT_NE(reinterpret_cast<void*>(lib.open_device), compat_open);
  }
  void* compat_reg = ::dlvsym(handle, "ibv_reg_mr", "IBVERBS_1.0");
  if (compat_reg) {
    EXPECT_NE(reinterpret_cast<void*>(lib.reg_mr), compat_reg);
  }
  ::dlclose(handle);  // the reference RTLD_NOLOAD took; the library stays
  // A plain call through the table.
  EXPECT_STREQ(lib.wc_status_str(IBV_WC_SUCCESS), "success");
}

TEST(VerbsLibrary, TheProcessLoadsItOnceFromAnyThread) {
  std::vector<const VerbsLibrary*> seen(4, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&, i] { seen[i] = &VerbsLibrary::get(); });
  for (auto& t : threads) t.join();
  for (const VerbsLibrary* lib : seen) EXPECT_EQ(lib, &VerbsLibrary::get());
  // Loaded or not, discovery answers without an error.
  std::vector<IbDeviceInfo> devices;
  EXPECT_TRUE(query_ib_devices(&devices).is_ok());
  if (!VerbsLibrary::get().loaded()) {
    EXPECT_TRUE(devices.empty());
  }
}

}  // namespace
}  // namespace kolo
