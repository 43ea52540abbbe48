#include "gpu/device_progress.h"

#include <chrono>

namespace kolo {

Status progress_with_device(Transport* wire, Deadline deadline, const Pump& pump, const std::string& device_name) {
  for (;;) {
    int completed = 0;
    bool device_busy = false;
    KOLO_RETURN_IF_ERROR(pump(&completed, &device_busy));
    if (completed > 0) return Status::ok();
    if (!device_busy) {
      // Only the wire can move anything now.
      KOLO_RETURN_IF_ERROR(wire->progress(deadline));
      return pump(&completed, &device_busy);
    }
    if (deadline.expired()) {
      return timeout_error("no progress before the deadline: copies on " + device_name + " did not finish");
    }
    // Copies are running on the GPU: look at the wire briefly, then at them.
    const Deadline soon = Deadline::after(std::chrono::microseconds(50));
    Status s = wire->progress(soon.time_point() < deadline.time_point() ? soon : deadline);
    if (s.is_ok()) return pump(&completed, &device_busy);
    if (s.code() != Code::kTimeout) return s;
  }
}

}  // namespace kolo
