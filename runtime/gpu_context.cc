#include "runtime/gpu_context.h"

#include <algorithm>

#include "common/log.h"
#include "gpu/open_device.h"
#include "gpu/staged_transport.h"
#include "common/gpu_driver.h"

namespace kolo {

GpuContext::~GpuContext() {
  // Transports first: they hold pinned memory of the device.
  direct_.reset();
  staged_.reset();
  memory_.reset();
  owned_.reset();
}

Status GpuContext::device(Device** out) {
  std::lock_guard<std::mutex> lock(open_mutex_);
  Device* device = device_.load(std::memory_order_relaxed);  // only this lock's holder sets it
  if (!device && !tried_) {
    tried_ = true;
    open_failure_ = open_device(local_rank_, &owned_);
    if (open_failure_.is_ok()) {
      device = owned_.get();
      device_.store(device, std::memory_order_release);
      KOLO_INFO("using " << device->name() << " for device buffers (local rank " << local_rank_ << ")");
    }
  }
  if (!device) return open_failure_;
  if (!kernels_loaded_) {
    Status loaded = device->load_kernels();
    if (!loaded.is_ok()) return loaded.with_context("opening " + device->name());
    kernels_loaded_ = true;
  }
  *out = device;
  return Status::ok();
}

Status GpuContext::classify(BufferList buffers, bool* on_device) {
  // No GPU open and no CUDA driver in the process: all host memory, with
  // nothing to ask (the common call of a CPU job: a small one's path
  // notices a question per buffer).
  if (!opened() && !cuda_driver()->present()) {
    *on_device = false;
    return Status::ok();
  }
  const NamedBuffer* first_host = nullptr;
  const NamedBuffer* first_device = nullptr;
  for (const NamedBuffer& b : buffers) {
    if (!b.data || b.bytes == 0) continue;
    // Before any GPU is open, the driver tells (it answers "host" in a
    // process without CUDA), so host-only callers never open one.
    const bool maybe_device = opened() || cuda_driver()->is_device_memory(b.data);
    MemoryKind kind = MemoryKind::kHost;
    if (maybe_device) {
      Device* d = nullptr;
      Status s = device(&d);
      if (!s.is_ok()) {
        return Status(s.code(), std::string(b.name) + " is GPU memory, but this rank can use no GPU: " + s.message());
      }
      kind = d->classify(b.data);
    }
    if (kind == MemoryKind::kOtherDevice) {
      Device* d = nullptr;
      (void)device(&d);  // open: it told the kind
      return invalid_argument(std::string(b.name) + " is memory of another GPU than this rank's " + d->name() +
                              " (kolo uses GPU local_rank % count)");
    }
    if (kind == MemoryKind::kThisDevice) {
      if (!first_device) first_device = &b;
    } else if (!first_host) {
      first_host = &b;
    }
  }
  if (first_host && first_device) {
    return invalid_argument(std::string(first_device->name) + " is GPU memory but " + first_host->name +
                            " is host memory: one call's buffers must all be one or the other");
  }
  *on_device = first_device != nullptr;
  return Status::ok();
}

Status GpuContext::adapt(ScheduleContext* ctx, Transport* host_transport,
                         const std::vector<const TransportKind*>& device_routes, const Config& config) {
  Device* d = nullptr;
  KOLO_RETURN_IF_ERROR(device(&d));
  std::lock_guard<std::mutex> lock(mutex_);
  KOLO_RETURN_IF_ERROR(open_transports_locked(d, host_transport, device_routes, config, ctx->segment_bytes));
  ctx->memory = memory_.get();
  if (!host_transport) return Status::ok();  // alone: nothing crosses a wire
  ctx->transport = direct_ ? direct_.get() : staged_.get();
  return Status::ok();
}

Status GpuContext::prepare(Transport* host_transport, const std::vector<const TransportKind*>& device_routes,
                           const Config& config, size_t segment_bytes, size_t largest) {
  Device* d = nullptr;
  KOLO_RETURN_IF_ERROR(device(&d));
  DeviceMemory* memory = nullptr;
  {
    // The first time only does this allocate: no collective on device
    // buffers has run yet, so none waits for this lock meanwhile.
    std::lock_guard<std::mutex> lock(mutex_);
    KOLO_RETURN_IF_ERROR(open_transports_locked(d, host_transport, device_routes, config, segment_bytes));
    memory = memory_.get();
  }
  // The rest may wait for the whole device (an earlier call's stream still
  // held): with no lock held that kolo's thread, which releases that
  // stream, may want. Peers' buffers the IPC transport met inside a hold
  // (it staged those messages instead) are opened, so that later calls
  // copy into them directly.
  KOLO_RETURN_IF_ERROR(d->open_remembered());
  // What the schedules ask of it for such a call: a scratch buffer the
  // size of the call's largest (the ring's work area, a relay), and
  // staging for the pipeline's slots, with as many again for transient
  // results (collectives/pipeline.cc), or for a small call's whole message
  // (recursive doubling).
  const size_t depth = static_cast<size_t>(std::max<int64_t>(1, config.pipeline_depth));
  const size_t staging = std::max(2 * depth * segment_bytes, std::min(largest, static_cast<size_t>(std::max<int64_t>(
                                                                                    0, config.small_allreduce_bytes))));
  if (!memory->reserve(staging, largest)) {
    return device_error("cannot allocate " + std::to_string(staging) + " + " + std::to_string(largest) +
                        " bytes of " + d->name() + "'s memory for a call's staging and scratch");
  }
  return Status::ok();
}

void GpuContext::release_retired() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (memory_) memory_->release_retired();
}

Status GpuContext::open_transports_locked(Device* d, Transport* host_transport,
                                          const std::vector<const TransportKind*>& device_routes,
                                          const Config& config, size_t segment_bytes) {
  if (!memory_) memory_ = std::make_unique<DeviceMemory>(d);
  if (!host_transport || staged_) return Status::ok();
  auto staged = std::make_unique<StagedTransport>(host_transport, d, segment_bytes,
                                                  static_cast<int>(config.pipeline_depth));
  KOLO_RETURN_IF_ERROR(staged->allocate_slots());
  staged_ = std::move(staged);
  // The one kind that carries device memory (CUDA IPC), to the peers it
  // reaches; the others' through staging.
  const TransportKind* kind = nullptr;
  std::vector<bool> reached(device_routes.size(), false);
  for (size_t r = 0; r < device_routes.size(); ++r) {
    if (!device_routes[r]) continue;
    if (kind && device_routes[r] != kind) {
      return internal_error("two kinds carry device memory to this rank's peers (" + std::string(kind->name()) + ", " +
                            device_routes[r]->name() + "): one GPU context opens one");
    }
    kind = device_routes[r];
    reached[r] = true;
  }
  if (kind) KOLO_RETURN_IF_ERROR(kind->open_over(staged_.get(), d, reached, &direct_));
  KOLO_INFO("device buffers move over " << (direct_ ? std::string(direct_->name()) + " to ranks on this node, " : "")
                                        << staged_->name() << (direct_ ? " to the others" : ""));
  return Status::ok();
}

}  // namespace kolo
