#include "common/gpu_driver.h"

#include <dlfcn.h>
#include <unistd.h>

#include <string>

namespace kolo {

namespace {

// The few driver API types and values used here, as cuda.h defines them
// (stable parts of the driver's ABI), so that no CUDA header is needed.
using CUresult = int;
using CUdeviceptr = unsigned long long;
constexpr CUresult kCudaSuccess = 0;
constexpr int kPointerAttributeMemoryType = 2;  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
constexpr unsigned kMemoryTypeDevice = 2;       // CU_MEMORYTYPE_DEVICE
constexpr int kRangeHandleDmaBufFd = 1;         // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD

using PointerGetAttribute = CUresult (*)(void* data, int attribute, CUdeviceptr ptr);
using MemGetAddressRange = CUresult (*)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr);
using MemGetHandleForAddressRange = CUresult (*)(void* handle, CUdeviceptr ptr, size_t size, int type,
                                                 unsigned long long flags);
using GetErrorString = CUresult (*)(CUresult error, const char** text);

class CudaDriver final : public GpuDriver {
 public:
  CudaDriver() {
    // Never closed: the application may be using the same library.
    void* lib = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return;
    pointer_attribute_ = reinterpret_cast<PointerGetAttribute>(::dlsym(lib, "cuPointerGetAttribute"));
    // cuda.h maps cuMemGetAddressRange to its _v2 ABI.
    address_range_ = reinterpret_cast<MemGetAddressRange>(::dlsym(lib, "cuMemGetAddressRange_v2"));
    range_handle_ = reinterpret_cast<MemGetHandleForAddressRange>(::dlsym(lib, "cuMemGetHandleForAddressRange"));
    error_string_ = reinterpret_cast<GetErrorString>(::dlsym(lib, "cuGetErrorString"));
  }

  bool present() const override { return pointer_attribute_ != nullptr; }

  bool is_device_memory(const void* p) override {
    if (!pointer_attribute_ || !p) return false;
    // Not initialized (the process never used CUDA) or not CUDA memory:
    // the call fails, and the memory is the host's.
    unsigned type = 0;
    return pointer_attribute_(&type, kPointerAttributeMemoryType, reinterpret_cast<CUdeviceptr>(p)) ==
               kCudaSuccess &&
           type == kMemoryTypeDevice;
  }

  Status export_dmabuf(const void* p, size_t bytes, int* fd, uint64_t* offset) override {
    if (!address_range_ || !range_handle_) {
      return unsupported("this CUDA driver cannot export dma-bufs (cuMemGetHandleForAddressRange needs CUDA 11.7 "
                         "or newer)");
    }
    const CUdeviceptr ptr = reinterpret_cast<CUdeviceptr>(p);
    CUdeviceptr base = 0;
    size_t size = 0;
    CUresult r = address_range_(&base, &size, ptr);
    if (r != kCudaSuccess) return unsupported("cuMemGetAddressRange: " + describe(r));
    if (ptr + bytes > base + size) {
      return invalid_argument(std::to_string(bytes) + " bytes from the device pointer run past its allocation (" +
                              std::to_string(base + size - ptr) + " bytes left in it)");
    }
    // The exported range must be whole host pages: the whole allocation,
    // rounded out to pages; the registration then starts at p's offset.
    const CUdeviceptr page = static_cast<CUdeviceptr>(::sysconf(_SC_PAGESIZE));
    const CUdeviceptr start = base & ~(page - 1);
    const CUdeviceptr end = (base + size + page - 1) & ~(page - 1);
    int handle = -1;
    r = range_handle_(&handle, start, static_cast<size_t>(end - start), kRangeHandleDmaBufFd, 0);
    if (r != kCudaSuccess) {
      return unsupported("cuMemGetHandleForAddressRange(dma-buf): " + describe(r) +
                         " (dma-bufs of GPU memory need the GPU's open kernel modules and Linux 5.12 or newer)");
    }
    *fd = handle;
    *offset = ptr - start;
    return Status::ok();
  }

 private:
  std::string describe(CUresult r) const {
    const char* text = nullptr;
    if (error_string_ && error_string_(r, &text) == kCudaSuccess && text) return text;
    return "CUDA error " + std::to_string(r);
  }

  PointerGetAttribute pointer_attribute_ = nullptr;
  MemGetAddressRange address_range_ = nullptr;
  MemGetHandleForAddressRange range_handle_ = nullptr;
  GetErrorString error_string_ = nullptr;
};

}  // namespace

GpuDriver* cuda_driver() {
  static CudaDriver driver;
  return &driver;
}

}  // namespace kolo
