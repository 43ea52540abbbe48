// The registration policy for host and device memory (GPUDirect RDMA), with
// a fake NIC and a fake CUDA driver: neither a NIC nor a GPU is needed.
#include "transport/ib/memory_registrar.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace kolo {
namespace {

// Device memory is whatever lies in [device_begin, device_end).
class FakeGpu : public GpuDriver {
 public:
  bool is_device_memory(const void* p) override {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return a >= device_begin && a < device_end;
  }
  Status export_dmabuf(const void* p, size_t bytes, int* fd, uint64_t* offset) override {
    ++exports;
    if (!dmabuf_supported) return unsupported("cuMemGetHandleForAddressRange(dma-buf): operation not supported");
    *fd = ::open("/dev/null", O_RDONLY);  // a real descriptor, so closing it can be checked
    exported_fds.push_back(*fd);
    *offset = reinterpret_cast<uintptr_t>(p) - device_begin;
    return Status::ok();
  }
  uintptr_t device_begin = 0x7f0000000000;
  uintptr_t device_end = 0x7f0000100000;
  bool dmabuf_supported = true;
  int exports = 0;
  std::vector<int> exported_fds;
};

class FakeNic : public NicRegistration {
 public:
  Status register_addresses(uintptr_t addr, size_t length, MemoryRegion* out) override {
    calls.push_back("addresses");
    if (!addresses_ok) return transport_error("ibv_reg_mr of " + std::to_string(length) + " bytes failed: Bad address");
    return fill(addr, length, out);
  }
  Status register_dmabuf(int fd, uint64_t offset, uintptr_t addr, size_t length, MemoryRegion* out) override {
    calls.push_back("dmabuf");
    EXPECT_GE(fcntl(fd, F_GETFD), 0) << "the dma-buf must be open while it is registered";
    dmabuf_offset = offset;
    if (!dmabuf_ok) return transport_error("ibv_reg_dmabuf_mr failed: Operation not supported");
    return fill(addr, length, out);
  }
  void deregister(const MemoryRegion& r) override { EXPECT_EQ(live.erase(r.lkey), 1u); }

  Status fill(uintptr_t addr, size_t length, MemoryRegion* out) {
    out->addr = addr;
    out->length = length;
    out->lkey = out->rkey = ++next_key;
    live.insert(out->lkey);
    return Status::ok();
  }
  std::vector<std::string> calls;
  std::set<uint32_t> live;
  uint32_t next_key = 0;
  uint64_t dmabuf_offset = 0;
  bool addresses_ok = true;
  bool dmabuf_ok = true;
};

TEST(MemoryRegistrar, HostMemoryIsRegisteredByAddressAndNeverExported) {
  FakeGpu gpu;
  FakeNic nic;
  MemoryRegistrar registrar(&nic, &gpu);
  std::vector<char> host(1000);
  MemoryRegion r;
  ASSERT_TRUE(registrar.register_memory(reinterpret_cast<uintptr_t>(host.data()), host.size(), &r).is_ok());
  EXPECT_EQ(nic.calls, std::vector<std::string>({"addresses"}));
  EXPECT_EQ(gpu.exports, 0);
  EXPECT_EQ(r.addr, reinterpret_cast<uintptr_t>(host.data()));
  EXPECT_EQ(registrar.stats().host, 1u);
  registrar.deregister(r);
  EXPECT_TRUE(nic.live.empty());
}

TEST(MemoryRegistrar, DeviceMemoryGoesThroughADmaBufFirst) {
  FakeGpu gpu;
  FakeNic nic;
  MemoryRegistrar registrar(&nic, &gpu);
  const uintptr_t buffer = gpu.device_begin + 0x2340;
  MemoryRegion r;
  ASSERT_TRUE(registrar.register_memory(buffer, 4096, &r).is_ok());
  EXPECT_EQ(nic.calls, std::vector<std::string>({"dmabuf"}));
  EXPECT_EQ(nic.dmabuf_offset, 0x2340u);  // the buffer's place in the exported allocation
  EXPECT_EQ(r.addr, buffer);              // the peer writes to the device addresses
  EXPECT_EQ(registrar.stats().device_dmabuf, 1u);
  // The registration keeps its own reference: the exported descriptor is closed.
  ASSERT_EQ(gpu.exported_fds.size(), 1u);
  EXPECT_LT(fcntl(gpu.exported_fds[0], F_GETFD), 0);
}

TEST(MemoryRegistrar, DeviceMemoryFallsBackToPeerMemoryWhenDmaBufIsMissing) {
  for (bool driver_exports : {false, true}) {
    FakeGpu gpu;
    FakeNic nic;
    gpu.dmabuf_supported = driver_exports;  // the driver cannot export, or the NIC cannot take it
    nic.dmabuf_ok = false;
    MemoryRegistrar registrar(&nic, &gpu);
    MemoryRegion r;
    ASSERT_TRUE(registrar.register_memory(gpu.device_begin, 4096, &r).is_ok());
    EXPECT_EQ(nic.calls.back(), "addresses");
    EXPECT_EQ(registrar.stats().device_peer_memory, 1u);
    EXPECT_EQ(registrar.stats().device_dmabuf, 0u);
    for (int fd : gpu.exported_fds) EXPECT_LT(fcntl(fd, F_GETFD), 0) << "leaked dma-buf descriptor";
  }
}

TEST(MemoryRegistrar, DeviceMemoryNoWayCanRegisterFailsSayingWhyForEach) {
  FakeGpu gpu;
  FakeNic nic;
  gpu.dmabuf_supported = false;
  nic.addresses_ok = false;
  MemoryRegistrar registrar(&nic, &gpu);
  MemoryRegion r;
  Status s = registrar.register_memory(gpu.device_begin + 64, 4096, &r);
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_NE(s.message().find("GPUDirect RDMA cannot register device memory at 0x7f0000000040 (4096 bytes)"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("dma-buf: cuMemGetHandleForAddressRange"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("peer memory: ibv_reg_mr"), std::string::npos) << s.message();
  EXPECT_TRUE(nic.live.empty());
}

TEST(MemoryRegistrar, WithoutACudaDriverEverythingIsHostMemory) {
  FakeNic nic;
  MemoryRegistrar registrar(&nic, nullptr);
  MemoryRegion r;
  ASSERT_TRUE(registrar.register_memory(0x7f0000000000, 4096, &r).is_ok());
  EXPECT_EQ(nic.calls, std::vector<std::string>({"addresses"}));
}

// The real driver on a machine without a GPU (as on every CI machine): host
// memory stays host memory, whether or not libcuda.so.1 is installed.
TEST(CudaDriver, HostMemoryIsNotDeviceMemory) {
  std::vector<char> host(64);
  EXPECT_FALSE(cuda_driver()->is_device_memory(host.data()));
  EXPECT_FALSE(cuda_driver()->is_device_memory(nullptr));
}

}  // namespace
}  // namespace kolo
