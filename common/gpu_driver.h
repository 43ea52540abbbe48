// What the CUDA driver says about memory kolo is given, asked at run time.
// kolo's default build links no CUDA: the driver (libcuda.so.1) is opened
// with dlopen the first time a question is asked, and a process without
// it, or one that never initialized CUDA, holds no device memory. This is
// how a transport tells device buffers from host ones before registering
// them with a NIC (GPUDirect RDMA).
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace kolo {

class GpuDriver {
 public:
  virtual ~GpuDriver() = default;

  // False where there is no driver at all: then no pointer is device
  // memory, and a caller with several to ask need ask none.
  virtual bool present() const { return true; }

  // True when p points into memory on a CUDA device (cudaMalloc, cuMemAlloc).
  virtual bool is_device_memory(const void* p) = 0;

  // A dma-buf file descriptor for the device allocation holding
  // [p, p + bytes), in *fd (the caller closes it), and where p lies in it,
  // in *offset. UNSUPPORTED when the driver or the GPU cannot export one.
  virtual Status export_dmabuf(const void* p, size_t bytes, int* fd, uint64_t* offset) = 0;
};

// The process's CUDA driver, opened on first use; where there is none it
// answers "host memory" to every pointer.
GpuDriver* cuda_driver();

}  // namespace kolo
