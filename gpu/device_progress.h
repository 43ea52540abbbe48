// The progress loop of a transport whose messages also wait on work on the
// GPU (copies on the Device's stream): it looks at the wire below briefly
// while that work runs, and waits on the wire alone when nothing runs on
// the GPU.
#pragma once

#include <functional>
#include <string>

#include "common/deadline.h"
#include "common/status.h"
#include "transport/transport.h"

namespace kolo {

// pump(&completed, &device_busy) moves every message as far as it can and
// counts the requests it finished, and whether any waits on the GPU.
using Pump = std::function<Status(int* completed, bool* device_busy)>;

Status progress_with_device(Transport* wire, Deadline deadline, const Pump& pump, const std::string& device_name);

}  // namespace kolo
