#include "gpu/open_device.h"

#ifdef KOLO_WITH_CUDA
#include "gpu/cuda/cuda_device.h"
#endif

namespace kolo {

Status open_device(int local_rank, std::unique_ptr<Device>* out) {
#ifdef KOLO_WITH_CUDA
  return open_cuda_device(local_rank, out);
#else
  (void)local_rank, (void)out;
  return unsupported("this kolo was built without CUDA support (build it with bazel build --config=cuda)");
#endif
}

}  // namespace kolo
