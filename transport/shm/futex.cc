#include "transport/shm/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>

namespace kolo {

namespace {

#ifndef SYS_futex_waitv
#define SYS_futex_waitv 449
#endif

timespec absolute_monotonic_after(int timeout_ms) {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  t.tv_sec += timeout_ms / 1000;
  t.tv_nsec += static_cast<long>(timeout_ms % 1000) * 1000000L;
  if (t.tv_nsec >= 1000000000L) {
    t.tv_sec += 1;
    t.tv_nsec -= 1000000000L;
  }
  return t;
}

}  // namespace

void futex_wake_all(std::atomic<uint32_t>* word) {
  // Not FUTEX_PRIVATE_FLAG: the word is shared with other processes.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void futex_wait_any(const std::vector<FutexWait>& words, int timeout_ms) {
  if (words.empty()) return;
  static std::atomic<bool> no_waitv{false};
  if (words.size() == 1 || no_waitv.load(std::memory_order_relaxed)) {
    // One word (or a kernel before 5.16): wait on the first, for at most a
    // millisecond when there are others, so none is watched for long.
    const int ms = words.size() == 1 ? timeout_ms : std::min(timeout_ms, 1);
    timespec relative{ms / 1000, static_cast<long>(ms % 1000) * 1000000L};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(words[0].word), FUTEX_WAIT, words[0].seen, &relative, nullptr, 0);
    return;
  }
  std::vector<futex_waitv> v(words.size());
  for (size_t i = 0; i < words.size(); ++i) {
    v[i] = {};
    v[i].val = words[i].seen;
    v[i].uaddr = reinterpret_cast<uintptr_t>(words[i].word);
    v[i].flags = FUTEX_32;
  }
  const timespec until = absolute_monotonic_after(timeout_ms);
  if (syscall(SYS_futex_waitv, v.data(), static_cast<unsigned>(v.size()), 0, &until, CLOCK_MONOTONIC) < 0 &&
      errno == ENOSYS) {
    no_waitv.store(true);
  }
}

}  // namespace kolo
