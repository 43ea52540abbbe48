// Fuzzes frame-header checks and the description of a fingerprint taken
// from the wire (used in error messages): arbitrary headers and tags must be
// judged and described, never crash.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "collectives/fingerprint.h"
#include "transport/frame.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::FrameHeader header{};
  uint64_t expect[3] = {0, 0, 0};
  size_t n = size < sizeof(header) ? size : sizeof(header);
  std::memcpy(&header, data, n);
  if (size > n) std::memcpy(expect, data + n, size - n < sizeof(expect) ? size - n : sizeof(expect));
  kolo::install_fingerprint_describer();
  kolo::Status s = kolo::check_frame_header(header, expect[0], expect[1], expect[2], "rank 1 (fuzz)");
  if (s.is_ok() && (header.seq != expect[0] || header.bytes != expect[1] || header.tag != expect[2])) {
    __builtin_trap();  // accepted a header that is not the one expected
  }
  (void)kolo::describe_fingerprint(header.tag);
  return 0;
}
