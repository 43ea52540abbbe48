// The wait every transport's progress() does, written once. Each round it
// looks for an abort or an interrupt, then lets the transport move bytes;
// when nothing completed it spins a while, since the next bytes usually come
// within microseconds and waking a sleeping process costs tens of
// microseconds (more in a VM), yielding the core meanwhile if ranks
// outnumber cores; then, unless the deadline has passed, it lets the
// transport sleep until its descriptors or the wake eventfd are ready.
//
// The transport supplies what differs (how to move bytes, how to sleep,
// what it still waits for) as callables; run() is a template, so they
// inline into its loop and cost no call through a pointer. interrupt() and
// abort() wake a sleeping run() through the eventfd this class owns.
#pragma once

#include <poll.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "transport/transport.h"

namespace kolo {

class ProgressLoop {
 public:
  ProgressLoop() = default;
  ~ProgressLoop();
  ProgressLoop(const ProgressLoop&) = delete;
  ProgressLoop& operator=(const ProgressLoop&) = delete;

  // Creates the wake eventfd.
  Status open();

  // Busy-poll for spin_us before sleeping, calling sched_yield between
  // polls if `yield`. From the thread that calls run().
  void set_polling(int spin_us, bool yield) {
    spin_us_ = spin_us;
    yield_ = yield;
  }

  // Makes every current and future run() return ABORTED. Any thread. True
  // for the call that aborted, false if it was aborted already.
  bool abort();
  bool aborted() const { return aborted_.load(); }

  // Makes the current run(), or the next if none is running, return OK
  // though nothing completed. Any thread.
  void interrupt();

  // Returns OK as soon as a request has completed (or a watched peer's
  // message was noticed, Transport::watch): pump(Pumped*) moves
  // what can move without blocking and counts it; sleep(Deadline, Pumped*)
  // waits for the transport's descriptors (through wait()), counting what
  // it completed itself; describe_pending() says what is still in flight,
  // for the timeout message ("" when nothing is).
  template <typename Pump, typename Sleep, typename Describe>
  Status run(Deadline deadline, Pump&& pump, Sleep&& sleep, Describe&& describe_pending);

  // For sleep: poll(2) on `fds` and the wake eventfd for at most
  // timeout_ms. *ready is how many descriptors are ready, 0 on a timeout or
  // a signal; `fds` gets their revents and is otherwise left as it was.
  Status wait(std::vector<pollfd>* fds, int timeout_ms, int* ready);

 private:
  void wake();
  void consume_wake();

  int wake_fd_ = -1;
  std::atomic<bool> aborted_{false};
  std::atomic<bool> interrupted_{false};
  static constexpr unsigned kPumpsPerClockRead = 16;
  int spin_us_ = 50;
  bool yield_ = true;
};

template <typename Pump, typename Sleep, typename Describe>
Status ProgressLoop::run(Deadline deadline, Pump&& pump, Sleep&& sleep, Describe&& describe_pending) {
  using Clock = std::chrono::steady_clock;
  Clock::time_point spin_until{};
  bool spinning = false;
  unsigned idle_pumps = 0;
  for (;;) {
    if (aborted_.load(std::memory_order_relaxed)) return kolo::aborted("communicator aborted");
    if (interrupted_.load(std::memory_order_relaxed) && interrupted_.exchange(false)) {
      consume_wake();
      return Status::ok();
    }
    Pumped pumped;
    KOLO_RETURN_IF_ERROR(pump(&pumped));
    if (pumped.completed > 0 || pumped.noticed) return Status::ok();
    if (pumped.moved) {
      spinning = false;
      continue;
    }
    // The clock only every kPumpsPerClockRead empty pumps: a read costs
    // about as much as a pump (some 24 ns in a VM), and the bytes that
    // end the wait are noticed a pump sooner without it.
    if (spinning && !yield_ && ++idle_pumps % kPumpsPerClockRead != 0) continue;
    const auto now = Clock::now();
    if (!spinning) {
      spinning = true;
      spin_until = now + std::chrono::microseconds(spin_us_);
    }
    if (now < spin_until) {
      if (yield_) sched_yield();
      continue;
    }
    if (deadline.expired()) {
      const std::string what = describe_pending();
      return timeout_error("no progress before the deadline while " + (what.empty() ? "nothing posted" : what));
    }
    // What wakes the sleep moves bytes in the next pump, which starts the
    // spin again.
    KOLO_RETURN_IF_ERROR(sleep(deadline, &pumped));
    if (pumped.completed > 0 || pumped.noticed) return Status::ok();
  }
}

}  // namespace kolo
