// How calls are launched, alone (call_launcher.h), over a fake `run` and
// an emulated GPU: queued calls run in call order and a blocking call after
// them; asynchronous handles complete with their call's result; a call on
// a caller's stream holds the stream until it has run and releases it even
// when it fails; nothing is enqueued after a failure; device buffers are
// told from host ones, and a call mixing them is refused naming both.
#include "runtime/call_launcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gpu/emulated_device.h"

namespace kolo {
namespace {

struct Fixture {
  EmulatedDevice device;
  std::mutex mutex;
  std::vector<std::string> ran;  // the calls run, in order
  Status result;                 // what every run returns
  Status health;                 // what healthy() says
  CallLauncher launcher;

  Fixture() : launcher(&device, 0, 10, hooks()) {}

  CallLauncher::Hooks hooks() {
    CallLauncher::Hooks h;
    h.run = [this](const CallRecord& call, CallLauncher::CollectiveRef fn) {
      ScheduleContext ctx;
      Status s = fn(ctx);
      std::lock_guard<std::mutex> lock(mutex);
      ran.push_back(call.what);
      return s.is_ok() ? result : s;
    };
    h.healthy = [this] { return health; };
    h.adapt = [](GpuContext*, ScheduleContext*) { return Status::ok(); };
    return h;
  }
  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mutex);
    return ran;
  }
};

// A collective that takes a while, so that a queue that did not keep order
// would show it.
const auto slow = [](const ScheduleContext&) {
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  return Status::ok();
};

TEST(CallLauncher, QueuedCallsRunInOrderAndABlockingCallAfterThem) {
  Fixture f;
  std::vector<float> host(4);
  std::vector<std::shared_ptr<OpHandle>> handles;
  for (const char* what : {"first", "second", "third"}) {
    Launch later;
    later.done.push_back(std::make_shared<OpHandle>());
    handles.push_back(later.done.back());
    ASSERT_TRUE(f.launcher.launch(what, {{host.data(), 16, "buf"}}, later, slow).is_ok());
  }
  ASSERT_TRUE(f.launcher.launch("blocking", {{host.data(), 16, "buf"}}, Launch{}, slow).is_ok());
  EXPECT_EQ(f.calls(), (std::vector<std::string>{"first", "second", "third", "blocking"}));
  for (const auto& h : handles) EXPECT_TRUE(h->wait(Deadline::after_seconds(5)).is_ok());
}

TEST(CallLauncher, AHandleCompletesWithItsCallsResult) {
  Fixture f;
  f.result = peer_lost("rank 1 left");
  std::vector<float> host(4);
  auto handle = std::make_shared<OpHandle>();
  Launch later;
  later.done.push_back(handle);
  ASSERT_TRUE(f.launcher.launch("allreduce", {{host.data(), 16, "buf"}}, later, slow).is_ok());
  Status s = handle->wait(Deadline::after_seconds(5));
  EXPECT_EQ(s.code(), Code::kPeerLost) << s.to_string();
  EXPECT_EQ(f.calls(), std::vector<std::string>{"allreduce"});
}

TEST(CallLauncher, AStreamIsHeldUntilTheCallRanAndReleasedWhenItFails) {
  for (bool fails : {false, true}) {
    SCOPED_TRACE(fails ? "failing" : "succeeding");
    Fixture f;
    if (fails) f.result = timeout_error("a peer never came");
    void* stream = f.device.create_stream();
    std::vector<float> host(4);
    std::atomic<bool> ran{false};
    ASSERT_TRUE(f.launcher
                    .launch("allreduce", {{host.data(), 16, "buf"}}, Launch::on(stream),
                            [&](const ScheduleContext&) {
                              std::this_thread::sleep_for(std::chrono::milliseconds(50));
                              ran = true;
                              return Status::ok();
                            })
                    .is_ok());
    // The caller's next work on the stream runs after the call, whatever
    // its result: the stream is never left waiting.
    std::atomic<bool> after_call{false};
    f.device.run_on(stream, [&] { after_call = ran.load(); });
    ASSERT_TRUE(f.device.synchronize_stream(stream, Deadline::after_seconds(5)));
    EXPECT_TRUE(after_call.load());
  }
}

// The hang on an H100, as a GPU has it: kolo's thread, running the job a
// caller's stream is held for, makes a call that waits for the whole
// device (here a cudaMalloc, as DeviceMemory's first growth did), which
// waits for that stream. The watchdog ends it by KOLO_TIMEOUT_S and the
// grace: the owner's error turns sticky naming the call, and the stream
// goes on. Without the watchdog the stream would wait for ever (the
// emulation's own 60 s cap, past this test's limit).
TEST(CallLauncher, AStreamHeldWhileKolosThreadWaitsForTheDeviceIsReleasedByTheDeadline) {
  EmulatedDevice device(0, DeviceWideCalls::kWaitForHolds);
  std::mutex mutex;
  Status failed;
  CallLauncher::Hooks h;
  h.run = [](const CallRecord&, CallLauncher::CollectiveRef fn) { return fn(ScheduleContext()); };
  h.healthy = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    return failed;
  };
  h.adapt = [](GpuContext*, ScheduleContext*) { return Status::ok(); };
  h.fail = [&](const Status& why) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failed.is_ok()) failed = why;
  };
  const double timeout_s = 1;
  CallLauncher launcher(&device, 0, timeout_s, h);
  void* stream = device.create_stream();
  std::vector<float> host(4);
  void* allocated = nullptr;
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(launcher
                  .launch("allreduce", {{host.data(), 16, "buf"}}, Launch::on(stream),
                          [&](const ScheduleContext&) {
                            allocated = device.allocate(64);
                            return Status::ok();
                          })
                  .is_ok());
  std::atomic<bool> after{false};
  device.run_on(stream, [&] { after = true; });
  ASSERT_TRUE(device.synchronize_stream(stream, Deadline::after_seconds(20)));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(after.load());
  EXPECT_GE(took, timeout_s + CallLauncher::kHoldGraceSeconds - 0.1);
  EXPECT_LT(took, 10) << "the held stream must go on by the deadline";
  {
    std::lock_guard<std::mutex> lock(mutex);
    EXPECT_EQ(failed.code(), Code::kTimeout) << failed.to_string();
    EXPECT_NE(failed.message().find("cudaMalloc"), std::string::npos) << failed.message();
    EXPECT_NE(failed.message().find("allreduce on a CUDA stream"), std::string::npos) << failed.message();
  }
  // The next call sees the failure at once.
  EXPECT_EQ(launcher.launch("allreduce", {{host.data(), 16, "buf"}}, Launch::on(stream), slow).code(), Code::kTimeout);
  ASSERT_TRUE(launcher.launch("barrier", {}, Launch{}, slow).is_ok());  // the queue has drained
  if (allocated) device.release(allocated);
}

// A caller's thread preparing a call on device buffers may wait for the
// whole device, that is for a stream held earlier, which kolo's thread
// releases once it reaches that stream's call. If kolo's thread meets on
// the way a completion that enqueues another call (as a torch future's
// callback may), that call must get in: were the caller's thread to keep
// the launcher's order while it waits, each would wait for the other.
TEST(CallLauncher, ACompletionEnqueuesWhileACallersThreadWaitsForTheDeviceInPrepare) {
  EmulatedDevice device(0, DeviceWideCalls::kWaitForHolds);
  CallLauncher::Hooks h;
  h.run = [](const CallRecord&, CallLauncher::CollectiveRef fn) { return fn(ScheduleContext()); };
  h.healthy = [] { return Status::ok(); };
  h.adapt = [](GpuContext*, ScheduleContext*) { return Status::ok(); };
  std::mutex mutex;
  std::vector<void*> grown;
  // Growing the GPU's memory for a call: an allocation, which waits for
  // every stream held so far.
  h.prepare = [&](GpuContext*, size_t largest) {
    void* p = device.allocate(largest);
    std::lock_guard<std::mutex> lock(mutex);
    grown.push_back(p);
    return Status::ok();
  };
  CallLauncher launcher(&device, 0, 30, h);
  void* stream = device.create_stream();
  void* small = device.allocate(16);
  void* large = device.allocate(1 << 20);  // before any hold
  std::vector<float> host(4);

  // 1. An asynchronous call on host buffers that lasts until released;
  // its completion enqueues another.
  std::atomic<bool> first_may_end{false};
  auto first = std::make_shared<OpHandle>();
  auto from_completion = std::make_shared<OpHandle>();
  Status enqueued_from_completion = internal_error("not called");
  first->set_callback([&](const Status&) {
    Launch later;
    later.done.push_back(from_completion);
    enqueued_from_completion = launcher.launch("from a completion", {{host.data(), 16, "buf"}}, later, slow);
  });
  Launch later;
  later.done.push_back(first);
  ASSERT_TRUE(launcher
                  .launch("first", {{host.data(), 16, "buf"}}, later,
                          [&](const ScheduleContext&) {
                            while (!first_may_end) std::this_thread::sleep_for(std::chrono::milliseconds(1));
                            return Status::ok();
                          })
                  .is_ok());
  // 2. A call on the caller's stream, queued behind it: its hold stays
  // until kolo's thread gets there.
  ASSERT_TRUE(launcher.launch("held", {{small, 16, "buf"}}, Launch::on(stream), slow).is_ok());
  // 3. From another thread, a call whose buffer is larger than any so far:
  // its preparation waits for the hold of 2.
  std::atomic<bool> third_launched{false};
  Status third_status;
  std::thread third([&] {
    third_status = launcher.launch("large", {{large, 1 << 20, "buf"}}, Launch::on(stream), slow);
    third_launched = true;
    EXPECT_TRUE(device.synchronize_stream(stream, Deadline::after_seconds(20)));
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // 3 is waiting for the device by now
  first_may_end = true;
  // Expected, not asserted: on a failure the thread is joined all the same
  // (once the emulated device gives up waiting, after 60 s).
  EXPECT_TRUE(first->wait(Deadline::after_seconds(20)).is_ok());
  EXPECT_TRUE(from_completion->wait(Deadline::after_seconds(20)).is_ok()) << "the completion's call never ran";
  EXPECT_TRUE(enqueued_from_completion.is_ok()) << enqueued_from_completion.to_string();
  third.join();
  EXPECT_TRUE(third_launched.load());
  EXPECT_TRUE(third_status.is_ok()) << third_status.to_string();
  std::lock_guard<std::mutex> lock(mutex);
  for (void* p : grown) device.release(p);
  device.release(small);
  device.release(large);
}

TEST(CallLauncher, NothingIsEnqueuedAfterAFailure) {
  Fixture f;
  f.health = aborted("rank 0 aborted its communicator");
  std::vector<float> host(4);
  Launch later;
  later.done.push_back(std::make_shared<OpHandle>());
  EXPECT_EQ(f.launcher.launch("allreduce", {{host.data(), 16, "buf"}}, later, slow).code(), Code::kAborted);
  EXPECT_EQ(f.launcher.launch("allreduce", {{host.data(), 16, "buf"}}, Launch::on(f.device.create_stream()), slow)
                .code(),
            Code::kAborted);
  EXPECT_TRUE(f.calls().empty());
}

TEST(CallLauncher, DeviceBuffersAreToldFromHostOnesAndNotMixed) {
  Fixture f;
  std::vector<float> host(4);
  void* on_gpu = f.device.allocate(16);
  bool on_device = false;
  ASSERT_TRUE(f.launcher.classify({{on_gpu, 16, "sendbuf"}}, &on_device).is_ok());
  EXPECT_TRUE(on_device);
  ASSERT_TRUE(f.launcher.classify({{host.data(), 16, "sendbuf"}}, &on_device).is_ok());
  EXPECT_FALSE(on_device);
  Status mixed = f.launcher.launch("allreduce", {{on_gpu, 16, "sendbuf"}, {host.data(), 16, "recvbuf"}}, Launch{}, slow);
  EXPECT_EQ(mixed.code(), Code::kInvalidArgument);
  EXPECT_NE(mixed.message().find("sendbuf"), std::string::npos) << mixed.message();
  EXPECT_NE(mixed.message().find("recvbuf"), std::string::npos) << mixed.message();
  // A blocking call on device buffers runs after the work on the default
  // stream, through the device path.
  ASSERT_TRUE(f.launcher.launch("broadcast", {{on_gpu, 16, "buf"}}, Launch{}, slow).is_ok());
  EXPECT_EQ(f.calls(), std::vector<std::string>{"broadcast"});
  int ordinal = -1;
  ASSERT_TRUE(f.launcher.gpu_ordinal(&ordinal).is_ok());
  EXPECT_EQ(ordinal, 0);
  f.device.release(on_gpu);
}

}  // namespace
}  // namespace kolo
