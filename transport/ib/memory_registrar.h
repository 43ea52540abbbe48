// How memory is registered with the NIC, host and device memory alike: the
// RegistrationBackend behind the registration cache and the staging rings.
//  - Host memory: ibv_reg_mr of its addresses.
//  - Device memory (GPUDirect RDMA), tried in NCCL's order: a dma-buf of its
//    CUDA allocation (ibv_reg_dmabuf_mr: Linux 5.12 or newer and the GPU's
//    open kernel modules), else ibv_reg_mr of the device addresses
//    themselves (which the NIC accepts where a peer-memory module such as
//    nvidia-peermem is loaded), else a TRANSPORT error saying why each way
//    failed. Either way the NIC reads and writes GPU memory directly;
//    nothing is copied through the host here.
// The NIC's calls sit behind NicRegistration (verbs in IbTransport, a fake in
// tests) and the driver's behind GpuDriver, so the policy runs without either.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"
#include "common/gpu_driver.h"
#include "transport/ib/registration_cache.h"

namespace kolo {

class NicRegistration {
 public:
  virtual ~NicRegistration() = default;
  // [addr, addr + length) as the process addresses it.
  virtual Status register_addresses(uintptr_t addr, size_t length, MemoryRegion* out) = 0;
  // `length` bytes from `offset` into the dma-buf `fd`, addressed by the
  // peer as [addr, addr + length).
  virtual Status register_dmabuf(int fd, uint64_t offset, uintptr_t addr, size_t length, MemoryRegion* out) = 0;
  virtual void deregister(const MemoryRegion& region) = 0;
};

class MemoryRegistrar final : public RegistrationBackend {
 public:
  MemoryRegistrar(NicRegistration* nic, GpuDriver* gpu) : nic_(nic), gpu_(gpu) {}

  Status register_memory(uintptr_t addr, size_t length, MemoryRegion* out) override;
  void deregister(const MemoryRegion& region) override { nic_->deregister(region); }

  struct Stats {
    uint64_t host = 0;                // host memory registered
    uint64_t device_dmabuf = 0;       // device memory, through a dma-buf
    uint64_t device_peer_memory = 0;  // device memory, through a peer-memory module
  };
  const Stats& stats() const { return stats_; }

 private:
  Status register_device(uintptr_t addr, size_t length, MemoryRegion* out);

  NicRegistration* nic_;
  GpuDriver* gpu_;
  Stats stats_;
};

}  // namespace kolo
