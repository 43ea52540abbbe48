#include "runtime/call_launcher.h"

#include <string>
#include <utility>

#include "gpu/device.h"

namespace kolo {

CallLauncher::CallLauncher(Device* device, int device_rank, double timeout_s, Hooks hooks)
    : device_(device), device_rank_(device_rank), timeout_s_(timeout_s), hooks_(std::move(hooks)) {}

CallLauncher::~CallLauncher() {
  queue_->stop();  // its jobs use everything else
  queue_.reset();
  gpu_.reset();
}

GpuContext* CallLauncher::gpu() {
  if (!gpu_) gpu_ = std::make_unique<GpuContext>(device_, device_rank_);
  return gpu_.get();
}

Status CallLauncher::classify(BufferList buffers, bool* on_device) {
  std::lock_guard<std::mutex> order(order_);
  return gpu()->classify(buffers, on_device);
}

Status CallLauncher::gpu_ordinal(int* ordinal) {
  std::lock_guard<std::mutex> order(order_);
  Device* device = nullptr;
  KOLO_RETURN_IF_ERROR(gpu()->device(&device));
  *ordinal = device->ordinal();
  return Status::ok();
}

Status CallLauncher::later(const CallRecord& call, BufferList buffers, Launch how, Collective fn) {
  std::lock_guard<std::mutex> order(order_);
  bool on_device = false;
  KOLO_RETURN_IF_ERROR(gpu()->classify(buffers, &on_device));
  if (how.on_stream) return on_stream(call, on_device, how.stream, std::move(fn));
  return async(call, on_device, std::move(how.done), std::move(fn));
}

Status CallLauncher::now(const CallRecord& call, BufferList buffers, CollectiveRef fn) {
  const char* what = call.what;
  std::lock_guard<std::mutex> order(order_);
  bool on_device = false;
  KOLO_RETURN_IF_ERROR(gpu()->classify(buffers, &on_device));
  // Collectives reach the ring in the order they were called: what is
  // still queued goes first.
  if (!queue_->drain(timeout_s_)) {
    return timeout_error(std::string(what) + ": collectives enqueued on streams earlier did not finish within "
                         "KOLO_TIMEOUT_S");
  }
  if (!on_device) return hooks_.run(call, fn);
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

Status CallLauncher::on_stream(const CallRecord& call, bool on_device, void* stream, Collective fn) {
  const char* what = call.what;
  KOLO_RETURN_IF_ERROR(hooks_.healthy());
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
  queue_->push([this, device, point, value, call, on_device, fn = std::move(fn)] {
    device->wait(point);
    if (on_device) {
      (void)run_on_device(call, fn);
    } else {
      // Host buffers: the stream's earlier work (a copy into them) must
      // have run before the host touches them.
      (void)hooks_.run(call, [&](const ScheduleContext& ctx) {
        KOLO_RETURN_IF_ERROR(device->synchronize(Deadline::after_seconds(timeout_s_)));
        return fn(ctx);
      });
    }
    // Always: a failed collective (now the sticky error) must not leave
    // the caller's stream waiting forever.
    device->signal(value);
  });
  return Status::ok();
}

Status CallLauncher::async(const CallRecord& call, bool on_device, std::vector<std::shared_ptr<OpHandle>> done,
                           Collective fn) {
  KOLO_RETURN_IF_ERROR(hooks_.healthy());
  // Device buffers: after the work already on the legacy default stream at
  // the time of the call, as the blocking call would be.
  Device* device = nullptr;
  StreamPoint point;
  if (on_device) {
    KOLO_RETURN_IF_ERROR(gpu()->device(&device));
    KOLO_RETURN_IF_ERROR(device->capture(nullptr, &point));
  }
  auto result = std::make_shared<Status>();
  std::weak_ptr<StreamQueue> queue = queue_;
  for (const auto& handle : done) {
    handle->set_helper([queue] {
      auto q = queue.lock();
      return q ? q->run_next_here() : StreamQueue::Ran::kNotThisThread;
    });
  }
  queue_->push(
      [this, call, device, point, on_device, result, fn = std::move(fn)] {
        if (!on_device) {
          *result = hooks_.run(call, fn);
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

Status CallLauncher::run_on_device(const CallRecord& call, CollectiveRef fn) {
  return hooks_.run(call, [&](const ScheduleContext& host_ctx) {
    ScheduleContext ctx = host_ctx;
    KOLO_RETURN_IF_ERROR(hooks_.adapt(gpu(), &ctx));
    Device* device = nullptr;
    KOLO_RETURN_IF_ERROR(gpu()->device(&device));
    const Deadline deadline = Deadline::after_seconds(timeout_s_);
    Status s = fn(ctx);
    // Even after a failure: nothing may still run on buffers the caller
    // gets back.
    Status done = device->synchronize(deadline);
    return s.is_ok() ? done : s;
  });
}

}  // namespace kolo
