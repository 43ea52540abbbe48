#include "runtime/call_launcher.h"

#include <algorithm>
#include <chrono>
#include <sstream>
#include <string>
#include <utility>

#include "gpu/device.h"

namespace kolo {

CallLauncher::CallLauncher(Device* device, int device_rank, double timeout_s, Hooks hooks)
    : timeout_s_(timeout_s),
      hooks_(std::move(hooks)),
      gpu_(std::make_unique<GpuContext>(device, device_rank)) {}

CallLauncher::~CallLauncher() {
  queue_->stop();  // its jobs use everything else (a stuck one ends by the watchdog)
  queue_.reset();
  {
    std::lock_guard<std::mutex> lock(holds_mutex_);
    stopping_ = true;
  }
  holds_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
  gpu_.reset();
}

namespace {

size_t largest(BufferList buffers) {
  size_t most = 0;
  for (const NamedBuffer& b : buffers) most = std::max(most, b.bytes);
  return most;
}

}  // namespace

GpuContext* CallLauncher::gpu() { return gpu_.get(); }

Status CallLauncher::classify(BufferList buffers, bool* on_device) { return gpu()->classify(buffers, on_device); }

Status CallLauncher::gpu_ordinal(int* ordinal) {
  Device* device = nullptr;
  KOLO_RETURN_IF_ERROR(gpu()->device(&device));
  *ordinal = device->ordinal();
  return Status::ok();
}

Status CallLauncher::gpu_device(Device** device) { return gpu()->device(device); }

Status CallLauncher::later(const CallRecord& call, BufferList buffers, Launch how, Collective fn) {
  bool on_device = false;
  KOLO_RETURN_IF_ERROR(gpu()->classify(buffers, &on_device));
  // Everything the call will need of the GPU, made now, on the caller's
  // thread: made by kolo's thread while a stream is held, it could wait for
  // that stream (see watch()). Made without order_: it may wait for the
  // whole device, that is for streams held earlier, which kolo's thread
  // releases as it works through its queue, and on the way a completion
  // may enqueue a call (a torch future's callback), which takes order_.
  if (on_device && hooks_.prepare) KOLO_RETURN_IF_ERROR(hooks_.prepare(gpu(), largest(buffers)));
  std::lock_guard<std::mutex> order(order_);
  if (how.on_stream) return on_stream(call, on_device, how.stream, std::move(fn));
  return async(call, on_device, std::move(how.done), std::move(fn));
}

Status CallLauncher::now(const CallRecord& call, BufferList buffers, CollectiveRef fn) {
  const char* what = call.what;
  bool on_device = false;
  KOLO_RETURN_IF_ERROR(gpu()->classify(buffers, &on_device));
  // The common call, on host buffers with nothing queued, runs at once: the
  // owner's run hook holds its call lock, which orders it with whatever
  // another thread enqueues meanwhile as order_ would (either may go first,
  // as two threads' calls may). An uncontended lock costs as much as the
  // rest of a small call's path.
  if (!on_device && queue_->idle()) return hooks_.run(call, fn);
  std::lock_guard<std::mutex> order(order_);
  // Collectives reach the ring in the order they were called: what is
  // still queued goes first.
  if (!queue_->drain(timeout_s_)) {
    return timeout_error(std::string(what) + ": collectives enqueued on streams earlier did not finish within "
                         "KOLO_TIMEOUT_S");
  }
  if (!on_device) return hooks_.run(call, fn);
  // Nothing is queued, so no stream is held: buffers replaced since may go.
  gpu()->release_retired();
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
  {
    std::lock_guard<std::mutex> lock(holds_mutex_);
    holds_.push_back(Hold{value, what});
    start_watchdog_locked(device);
  }
  holds_cv_.notify_all();
  queue_->push([this, device, point, value, call, on_device, fn = std::move(fn)] {
    const ReleasingHoldsScope releasing;
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
    release_hold(device, value);
  });
  return Status::ok();
}

void CallLauncher::release_hold(Device* device, uint64_t value) {
  {
    std::lock_guard<std::mutex> lock(holds_mutex_);
    holds_.erase(std::remove_if(holds_.begin(), holds_.end(), [&](const Hold& h) { return h.value <= value; }),
                 holds_.end());
  }
  device->signal(value);
}

void CallLauncher::start_watchdog_locked(Device* device) {
  if (watchdog_.joinable()) return;
  held_device_ = device;
  watchdog_ = std::thread([this] { watch(); });
}

void CallLauncher::watch() {
  const double limit_s = timeout_s_ + kHoldGraceSeconds;
  // Looks often enough to end a stuck call within about an eighth past
  // its limit.
  const auto period = std::chrono::duration<double>(std::min(1.0, std::max(0.01, limit_s / 8)));
  const char* seen_call = nullptr;
  uint64_t seen_number = 0;
  auto seen_since = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(holds_mutex_);
  while (!stopping_) {
    if (holds_.empty()) {
      seen_call = nullptr;
      holds_cv_.wait(lock, [&] { return stopping_ || !holds_.empty(); });  // on_stream notifies
      continue;
    }
    holds_cv_.wait_for(lock, period);
    if (holds_.empty()) continue;
    uint64_t number = 0;
    const char* call = held_device_->call_in_progress(&number);
    const auto now = std::chrono::steady_clock::now();
    if (!call || call != seen_call || number != seen_number) {
      seen_call = call;
      seen_number = number;
      seen_since = now;
      continue;
    }
    if (now - seen_since < std::chrono::duration<double>(limit_s)) continue;
    // One CUDA call has lasted past the limit while streams are held.
    std::ostringstream why;
    why << holds_.front().what << " on a CUDA stream: kolo's thread has been in " << call << " for "
        << static_cast<int>(limit_s) << " s (KOLO_TIMEOUT_S=" << timeout_s_ << " and " << kHoldGraceSeconds
        << " s), a call that waits for the whole device while the caller's stream waits for kolo; the stream was "
           "released and the call abandoned";
    const uint64_t last = holds_.back().value;
    holds_.clear();
    seen_call = nullptr;
    lock.unlock();
    if (hooks_.fail) hooks_.fail(timeout_error(why.str()));
    held_device_->signal(last);
    lock.lock();
  }
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
        const ReleasingHoldsScope releasing;  // a later call's hold may wait for this job
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
