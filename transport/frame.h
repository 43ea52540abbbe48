// The header in front of every message a transport carries. It lets the
// receiver verify, before it trusts a payload, that the message is the one it
// expects: right size, right operation, right place in the sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"

namespace kolo {

constexpr uint32_t kFrameMagic = 0x4b4f4c46;  // "KOLF"

struct FrameHeader {
  uint32_t magic;
  uint32_t checksum;  // reserved for a payload checksum; 0 when unused
  uint64_t seq;       // per-direction message counter, starting at 0
  uint64_t bytes;     // payload size
  uint64_t tag;       // operation fingerprint (see collectives/fingerprint.h)
};
static_assert(sizeof(FrameHeader) == 32, "FrameHeader is a wire format");

FrameHeader make_frame_header(uint64_t seq, uint64_t bytes, uint64_t tag);

// Checks a received header against what the receiver posted. `peer` names
// the sender in the error message. Never trusts header.bytes for anything but
// the comparison.
Status check_frame_header(const FrameHeader& got, uint64_t expected_seq, uint64_t expected_bytes,
                          uint64_t expected_tag, const std::string& peer);

// Turns a tag into words for error messages; installed by the collectives
// layer, which knows what a tag encodes. Defaults to hexadecimal.
using TagDescriber = std::string (*)(uint64_t tag);
void set_tag_describer(TagDescriber describer);
std::string describe_tag(uint64_t tag);

}  // namespace kolo
