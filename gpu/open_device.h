// The GPU a rank works on, opened when it first passes device memory.
#pragma once

#include <memory>

#include "gpu/device.h"

namespace kolo {

// GPU local_rank % (GPUs visible), as Horovod's users expect
// (cudaSetDevice). UNSUPPORTED saying why when there is none: a build
// without CUDA (bazel build --config=cuda), or no GPU or driver here.
Status open_device(int local_rank, std::unique_ptr<Device>* out);

}  // namespace kolo
