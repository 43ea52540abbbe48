// Futexes shared between processes (words in a shared memory segment):
// wake the sleepers on one word, or sleep until any of several words
// differs from what was last seen (futex_waitv, Linux 5.16), so that a rank
// waiting on several peers sleeps once.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

namespace kolo {

void futex_wake_all(std::atomic<uint32_t>* word);

struct FutexWait {
  std::atomic<uint32_t>* word;
  uint32_t seen;  // sleep only while *word == seen
};

// Returns when a word differs from its `seen` (at once if one already
// does), after a wake, or after timeout_ms. Spurious returns are allowed.
void futex_wait_any(const std::vector<FutexWait>& words, int timeout_ms);

}  // namespace kolo
