// A Device emulated on host threads, so that everything built on the
// Device interface (device collectives, the staged and CUDA IPC transports,
// stream-ordered calls) is tested on machines without a GPU. "Device
// memory" is host memory this object allocated and tracks; each stream,
// kolo's and the callers', is a queue of host functions run in order by a
// thread of its own, so work really runs later than it is enqueued, and a
// missing fence shows up as wrong data. `lag_us` delays every operation to
// widen those windows. IPC handles carry addresses: they open only in the
// same process (ranks as threads).
//
// Calls that wait for the whole device on a real GPU (an allocation, a
// free, an IPC import, a kernel's first use: its module's load) are where
// stream-ordered calls deadlock: made while a caller's stream is held, by
// the thread that must release the hold, they wait for a stream that waits
// for them. The emulation models them (DeviceWideCalls).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/device.h"

namespace kolo {

// A queue of host functions run in order by a thread of its own.
class EmulatedStream {
 public:
  explicit EmulatedStream(int lag_us);
  ~EmulatedStream();  // runs what is queued, then stops

  // Returns the function's ticket: it has run once completed() >= ticket.
  uint64_t enqueue(std::function<void()> fn);
  uint64_t enqueued() const;
  uint64_t completed() const { return completed_.load(); }
  bool wait_for(uint64_t ticket, Deadline deadline);

 private:
  void loop();

  const int lag_us_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t enqueued_ = 0;
  std::atomic<uint64_t> completed_{0};
  bool stopping_ = false;
  std::thread thread_;
};

// What a call that waits for the whole device does while a caller's stream
// is held.
enum class DeviceWideCalls {
  // Strict, the default: on the thread that releases the holds
  // (ReleasingHoldsScope) it fails at once, "would deadlock on CUDA: ...",
  // and is kept in violations(); on any other thread it goes on.
  kFailWhereTheyDeadlock,
  // As on a GPU: it waits until every hold made so far has been released,
  // so on that thread it waits for itself (until something else releases
  // the hold, or 60 s).
  kWaitForHolds,
};

class EmulatedDevice : public Device {
 public:
  explicit EmulatedDevice(int lag_us = 0, DeviceWideCalls mode = DeviceWideCalls::kFailWhereTheyDeadlock);
  ~EmulatedDevice() override;

  // A caller's stream (what cudaStreamCreate gives), owned by the device;
  // pass it where a cudaStream_t goes.
  void* create_stream();
  // Enqueues host work on a caller's stream, as a kernel of the caller's.
  void run_on(void* stream, std::function<void()> fn);
  // Waits for everything enqueued on a caller's stream so far.
  bool synchronize_stream(void* stream, Deadline deadline);
  // The next enqueued operation of kolo's stream fails with this status
  // (what a failed kernel launch looks like).
  void fail_next(Status status);
  // The calls strict mode failed, each saying what and why.
  std::vector<std::string> violations() const;
  // How many times find_imported found an allocation not open yet (each
  // is then opened before the next call's hold).
  size_t imports_deferred() const;

  std::string name() const override { return "emulated GPU"; }
  int ordinal() const override { return 0; }
  MemoryKind classify(const void* p) override;
  void* allocate(size_t bytes) override;
  void release(void* p) override;
  void* allocate_pinned(size_t bytes) override;
  void release_pinned(void* p) override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void reduce(DataType dtype, ReduceOp op, void* out, const void* a, const void* b, size_t count) override;
  void divide(DataType dtype, void* buf, size_t count, int divisor) override;
  void scale(DataType dtype, void* out, const void* in, size_t count, double factor) override;
  uint64_t fence() override;
  Status poll(uint64_t fence, bool* passed) override;
  Status synchronize(Deadline deadline) override;
  Status capture(void* stream, StreamPoint* point) override;
  void wait(StreamPoint point) override;
  Status hold(void* stream, uint64_t value) override;
  void signal(uint64_t value) override;
  Status export_memory(const void* p, IpcHandle* handle) override;
  Status import_memory(const IpcHandle& handle, void** p) override;
  Status load_kernels() override;
  const char* call_in_progress(uint64_t* number) const override;

 protected:
  bool find_open(const IpcHandle& handle, void** p) override;

 private:
  // Before a call that waits for the whole device (`call`, a CUDA name;
  // `detail`: its arguments): false where strict mode fails it.
  bool device_wide(const char* call, const std::string& detail);
  // A kernel's first use loads its module: a call that waits for the
  // device unless load_kernels() loaded them all. False where it failed.
  bool first_use(int kernel, const char* what);
  // Enqueues fn on kolo's stream, or the injected failure in its place.
  void enqueue(std::function<void()> fn);
  // The allocation holding p: its base, or nullptr.
  unsigned char* base_of(const void* p, size_t* bytes);

  const int lag_us_;
  const DeviceWideCalls mode_;
  mutable std::mutex mutex_;
  std::map<unsigned char*, size_t> allocations_;  // base -> bytes
  Status failure_;         // of enqueued work, until reported
  Status inject_;          // fails the next enqueued operation
  std::condition_variable signal_cv_;
  uint64_t signaled_ = 0;
  uint64_t held_ = 0;  // the largest value a caller's stream was held for
  bool closing_ = false;
  std::vector<std::string> violations_;
  std::set<int> loaded_kernels_;
  std::set<unsigned char*> imported_;  // allocations opened by import_memory
  size_t imports_deferred_ = 0;
  bool all_kernels_loaded_ = false;
  std::atomic<const char*> in_call_{nullptr};
  std::atomic<uint64_t> calls_started_{0};
  std::vector<std::unique_ptr<EmulatedStream>> caller_streams_;
  EmulatedStream stream_;  // kolo's; declared last, so it stops first
};

}  // namespace kolo
