#include "transport/ib/memory_registrar.h"

#include <unistd.h>

#include <mutex>
#include <sstream>

#include "common/log.h"

namespace kolo {

namespace {

std::string where(uintptr_t addr, size_t length) {
  std::ostringstream s;
  s << "device memory at 0x" << std::hex << addr << std::dec << " (" << length << " bytes)";
  return s.str();
}

}  // namespace

Status MemoryRegistrar::register_memory(uintptr_t addr, size_t length, MemoryRegion* out) {
  if (gpu_ && gpu_->is_device_memory(reinterpret_cast<const void*>(addr))) return register_device(addr, length, out);
  KOLO_RETURN_IF_ERROR(nic_->register_addresses(addr, length, out));
  ++stats_.host;
  return Status::ok();
}

Status MemoryRegistrar::register_device(uintptr_t addr, size_t length, MemoryRegion* out) {
  // Said once per process: which way GPUDirect RDMA works here.
  static std::once_flag told_dmabuf, told_peer_memory;
  int fd = -1;
  uint64_t offset = 0;
  Status dmabuf = gpu_->export_dmabuf(reinterpret_cast<const void*>(addr), length, &fd, &offset);
  if (dmabuf.is_ok()) {
    dmabuf = nic_->register_dmabuf(fd, offset, addr, length, out);
    ::close(fd);  // the registration holds its own reference to the dma-buf
    if (dmabuf.is_ok()) {
      ++stats_.device_dmabuf;
      std::call_once(told_dmabuf, [] { KOLO_INFO("GPUDirect RDMA: device memory registered through dma-buf"); });
      return Status::ok();
    }
  }
  Status peer_memory = nic_->register_addresses(addr, length, out);
  if (peer_memory.is_ok()) {
    ++stats_.device_peer_memory;
    std::call_once(told_peer_memory, [&] {
      KOLO_INFO("GPUDirect RDMA: device memory registered through a peer-memory module (dma-buf: "
                << dmabuf.message() << ")");
    });
    return Status::ok();
  }
  return transport_error("GPUDirect RDMA cannot register " + where(addr, length) + ": dma-buf: " + dmabuf.message() +
                         "; peer memory: " + peer_memory.message());
}

}  // namespace kolo
