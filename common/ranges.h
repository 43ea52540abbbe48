// Whether two byte ranges share memory; empty ranges share none. Used to
// validate and plan in-place collectives.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kolo {

inline bool ranges_overlap(const void* a, size_t a_bytes, const void* b, size_t b_bytes) {
  const auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return a_bytes && b_bytes && pa < pb + b_bytes && pb < pa + a_bytes;
}

}  // namespace kolo
