// How a collective of the public API is launched (Launch): blocking, on a
// caller's CUDA stream, or asynchronously on the communicator's queue; on
// host or device buffers. Every kind ends in run() (communicator_failure.cc).
#include "gpu/device.h"
#include "runtime/communicator.h"

namespace kolo {

Status Communicator::gpu_ordinal(int* ordinal) {
  std::lock_guard<std::mutex> order(stream_mutex_);
  Device* device = nullptr;
  KOLO_RETURN_IF_ERROR(gpu()->device(&device));
  *ordinal = device->ordinal();
  return Status::ok();
}

GpuContext* Communicator::gpu() {
  if (!gpu_) gpu_ = std::make_unique<GpuContext>(config_.device, world_.device_local_rank);
  return gpu_.get();
}

Status Communicator::dispatch_later(const CallRecord& call, BufferList buffers, Launch launch, Collective fn) {
  std::lock_guard<std::mutex> order(stream_mutex_);
  bool on_device = false;
  KOLO_RETURN_IF_ERROR(gpu()->classify(buffers, &on_device));
  if (launch.on_stream) return enqueue_on_stream(call, on_device, launch.stream, std::move(fn));
  return enqueue_async(call, on_device, std::move(launch.done), std::move(fn));
}

Status Communicator::dispatch_now(const CallRecord& call, BufferList buffers, CollectiveRef fn) {
  const char* what = call.what;
  std::lock_guard<std::mutex> order(stream_mutex_);
  bool on_device = false;
  KOLO_RETURN_IF_ERROR(gpu()->classify(buffers, &on_device));
  // Collectives reach the ring in the order they were called: what is
  // still queued on streams goes first.
  if (!stream_queue_->drain(config_.timeout_s)) {
    return timeout_error(std::string(what) + ": collectives enqueued on streams earlier did not finish within "
                         "KOLO_TIMEOUT_S");
  }
  if (!on_device) return run(call, fn);
  // Blocking on device buffers: after the work already on the legacy
  // default stream (which follows every blocking stream), as a
  // cudaMemcpy would be.
  Device* device = nullptr;
  KOLO_RETURN_IF_ERROR(gpu()->device(&device));
  StreamPoint point;
  KOLO_RETURN_IF_ERROR(device->capture(nullptr, &point));
  device->wait(point);
  return run_on_device(call, fn);
}

Status Communicator::enqueue_on_stream(const CallRecord& call, bool on_device, void* stream, Collective fn) {
  const char* what = call.what;
  KOLO_RETURN_IF_ERROR(check_healthy());
  Device* device = nullptr;
  Status s = gpu()->device(&device);
  if (!s.is_ok()) return Status(s.code(), std::string(what) + " on a CUDA stream: " + s.message());
  StreamPoint point;
  KOLO_RETURN_IF_ERROR(device->capture(stream, &point));
  const uint64_t value = stream_ops_ + 1;
  s = device->hold(stream, value);
  if (!s.is_ok()) {
    device->wait(point);  // frees the point; kolo's stream passes it at once
    return s.with_context(std::string(what) + " on a CUDA stream");
  }
  stream_ops_ = value;
  stream_queue_->push([this, device, point, value, call, on_device, fn = std::move(fn)] {
    device->wait(point);
    if (on_device) {
      (void)run_on_device(call, fn);
    } else {
      // Host buffers: the stream's earlier work (a copy into them) must
      // have run before the host touches them.
      (void)run(call, [&](const ScheduleContext& ctx) {
        KOLO_RETURN_IF_ERROR(device->synchronize(Deadline::after_seconds(config_.timeout_s)));
        return fn(ctx);
      });
    }
    // Always: a failed collective (now the sticky error) must not leave
    // the caller's stream waiting forever.
    device->signal(value);
  });
  return Status::ok();
}

Status Communicator::enqueue_async(const CallRecord& call, bool on_device, std::vector<std::shared_ptr<OpHandle>> done,
                                   Collective fn) {
  KOLO_RETURN_IF_ERROR(check_healthy());
  // Device buffers: after the work already on the legacy default stream at
  // the time of the call, as the blocking call would be.
  Device* device = nullptr;
  StreamPoint point;
  if (on_device) {
    KOLO_RETURN_IF_ERROR(gpu()->device(&device));
    KOLO_RETURN_IF_ERROR(device->capture(nullptr, &point));
  }
  auto result = std::make_shared<Status>();
  std::weak_ptr<StreamQueue> queue = stream_queue_;
  for (const auto& handle : done) {
    handle->set_helper([queue] {
      auto q = queue.lock();
      return q ? q->run_next_here() : StreamQueue::Ran::kNotThisThread;
    });
  }
  stream_queue_->push(
      [this, call, device, point, on_device, result, fn = std::move(fn)] {
        if (!on_device) {
          *result = run(call, fn);
          return;
        }
        device->wait(point);
        *result = run_on_device(call, fn);
      },
      // After the job: a callback may enqueue more, and a blocking call
      // draining the queue need not wait for it.
      [result, done = std::move(done)] {
        for (const auto& handle : done) handle->complete(*result);
      });
  return Status::ok();
}

Status Communicator::run_on_device(const CallRecord& call, CollectiveRef fn) {
  return run(call, [&](const ScheduleContext& host_ctx) {
    ScheduleContext ctx = host_ctx;
    KOLO_RETURN_IF_ERROR(gpu()->adapt(&ctx, transport_.get(), device_routes_, config_));
    Device* device = nullptr;
    KOLO_RETURN_IF_ERROR(gpu()->device(&device));
    const Deadline deadline = Deadline::after_seconds(config_.timeout_s);
    Status s = fn(ctx);
    // Even after a failure: nothing may still run on buffers the caller
    // gets back.
    Status done = device->synchronize(deadline);
    return s.is_ok() ? done : s;
  });
}


}  // namespace kolo
