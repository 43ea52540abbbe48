// How a collective of the public API is launched: blocking (the default),
// on a caller's CUDA stream, or asynchronously on a queue of its own, on
// host or device buffers. It decides when, where and in which order a
// collective runs; what running one is (the call lock, the flight record,
// the sticky failure) is its owner's, given as Hooks::run. Testable alone,
// on an emulated GPU (call_launcher_test.cc).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/ring.h"
#include "common/function_ref.h"
#include "common/status.h"
#include "runtime/flight_recorder.h"
#include "runtime/gpu_context.h"
#include "runtime/op_handle.h"
#include "runtime/stream_queue.h"

namespace kolo {

// How a collective is launched: blocking (the default); enqueued on a
// caller's CUDA stream (on_stream; stream nullptr is the legacy default
// stream); or asynchronously (done not empty): queued in call order,
// completing every handle in `done` with its result.
struct Launch {
  bool on_stream = false;
  void* stream = nullptr;
  std::vector<std::shared_ptr<OpHandle>> done;

  static Launch on(void* stream) {
    Launch launch;
    launch.on_stream = true;
    launch.stream = stream;
    return launch;
  }
};

class CallLauncher {
 public:
  using Collective = std::function<Status(const ScheduleContext&)>;
  using CollectiveRef = FunctionRef<Status(const ScheduleContext&)>;
  struct Hooks {
    // Runs a collective with the owner's schedule context (its call lock,
    // flight record and sticky failure).
    std::function<Status(const CallRecord&, CollectiveRef)> run;
    // The owner's sticky error: nothing is enqueued after a failure.
    std::function<Status()> healthy;
    // Turns a host schedule context into one for device buffers
    // (GpuContext::adapt with the owner's transport and routes).
    std::function<Status(GpuContext*, ScheduleContext*)> adapt;
    // Before a call on device buffers is queued: what it will need of the
    // GPU, set up from the caller's thread (GpuContext::prepare with the
    // owner's transport and routes; largest: its largest buffer's bytes).
    std::function<Status(GpuContext*, size_t largest)> prepare;
    // Makes `why` the owner's sticky error, from any thread (the watchdog's).
    std::function<void(const Status& why)> fail;
  };
  // device: a Device to use instead of opening one (tests); device_rank:
  // which GPU this rank opens (local_rank % count). timeout_s bounds every
  // wait (KOLO_TIMEOUT_S).
  CallLauncher(Device* device, int device_rank, double timeout_s, Hooks hooks);
  // Runs what callers enqueued (each bounded by its deadline), then stops.
  ~CallLauncher();
  // How long kolo's thread may sit in one CUDA call while a caller's
  // stream is held before the watchdog releases the stream: KOLO_TIMEOUT_S
  // and this much more.
  static constexpr double kHoldGraceSeconds = 1.0;

  // A collective: tells host from device buffers, and runs it now or
  // enqueues it. Only an enqueued one is copied into a Collective: a
  // blocking call, the common one, allocates nothing for its schedule,
  // and takes `how` by reference (later() copies what it queues).
  template <typename Fn>
  Status launch(const CallRecord& call, BufferList buffers, const Launch& how, Fn&& fn) {
    if (how.on_stream || !how.done.empty()) return later(call, buffers, how, Collective(std::forward<Fn>(fn)));
    return now(call, buffers, fn);
  }
  // Whether the buffers are device memory (a call that must know before
  // it launches; the engine's submissions). Any thread, waiting for no
  // call in progress.
  Status classify(BufferList buffers, bool* on_device);
  // The GPU's ordinal, opening it if needed.
  Status gpu_ordinal(int* ordinal);
  // The GPU itself, opening it if needed.
  Status gpu_device(Device** device);

 private:
  // Blocking: after what is still queued, and on device buffers after the
  // work on the legacy default stream (as a cudaMemcpy would be).
  Status now(const CallRecord& call, BufferList buffers, CollectiveRef fn);
  Status later(const CallRecord& call, BufferList buffers, Launch how, Collective fn);
  // On a stream: the stream is held until the collective has run, and
  // released whatever its result (a failed one is the sticky error).
  Status on_stream(const CallRecord& call, bool on_device, void* stream, Collective fn);
  Status async(const CallRecord& call, bool on_device, std::vector<std::shared_ptr<OpHandle>> done, Collective fn);
  // run() on device buffers: through the GPU's memory and transports, and
  // done once the GPU's work for it has run.
  Status run_on_device(const CallRecord& call, CollectiveRef fn);
  GpuContext* gpu();
  // The watchdog of held streams. A call that waits for the whole device,
  // made by kolo's thread while a caller's stream is held, waits for that
  // stream, which waits for kolo: a deadlock CUDA never ends. The watchdog
  // thread (started at the first hold) watches the CUDA call kolo's thread
  // is in (Device::call_in_progress); one that lasts KOLO_TIMEOUT_S and the
  // grace makes the owner's error sticky, naming that call, and releases
  // every held stream, so the callers' streams go on and the calls fail.
  void start_watchdog_locked(Device* device);
  void watch();
  // A job's end: its hold (and every earlier one) is released.
  void release_hold(Device* device, uint64_t value);

  const double timeout_s_;
  const Hooks hooks_;
  std::unique_ptr<GpuContext> gpu_;  // opens the GPU at the first call on device memory
  std::mutex order_;                 // orders calls between the callers' threads and the queue
  uint64_t stream_ops_ = 0;          // collectives enqueued on streams so far
  // Shared with the handles of what it runs (their waits on its own
  // thread run it forward: OpHandle::set_helper).
  std::shared_ptr<StreamQueue> queue_ = std::make_shared<StreamQueue>();

  // The held streams, for the watchdog.
  struct Hold {
    uint64_t value;
    const char* what;  // the call, for the error
  };
  std::mutex holds_mutex_;
  std::condition_variable holds_cv_;
  std::vector<Hold> holds_;  // not yet released, in value order
  Device* held_device_ = nullptr;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace kolo
