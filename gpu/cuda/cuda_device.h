// The Device of a CUDA GPU (--config=cuda only).
#pragma once

#include <memory>

#include "gpu/device.h"

namespace kolo {

// GPU local_rank % (GPUs visible), made current on the calling thread.
// UNSUPPORTED naming CUDA's reason when there is no usable GPU.
Status open_cuda_device(int local_rank, std::unique_ptr<Device>* out);

}  // namespace kolo
