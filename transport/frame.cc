#include "transport/frame.h"

#include <atomic>
#include <cstdio>

namespace kolo {
namespace {

std::string hex_tag(uint64_t tag) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "tag 0x%016llx", static_cast<unsigned long long>(tag));
  return buf;
}

std::atomic<TagDescriber> g_describer{&hex_tag};

}  // namespace

FrameHeader make_frame_header(uint64_t seq, uint64_t bytes, uint64_t tag) {
  FrameHeader h{};
  h.magic = kFrameMagic;
  h.checksum = 0;
  h.seq = seq;
  h.bytes = bytes;
  h.tag = tag;
  return h;
}

Status check_frame_header(const FrameHeader& got, uint64_t expected_seq, uint64_t expected_bytes,
                          uint64_t expected_tag, const std::string& peer) {
  if (got.magic != kFrameMagic) {
    return transport_error("corrupt frame from " + peer + ": bad magic (stream out of sync)");
  }
  if (got.seq != expected_seq) {
    return transport_error("out-of-sequence frame from " + peer + ": got message " + std::to_string(got.seq) +
                           ", expected " + std::to_string(expected_seq));
  }
  if (got.tag != expected_tag) {
    return mismatch(peer + " is running " + describe_tag(got.tag) + " but this rank is running " +
                    describe_tag(expected_tag));
  }
  if (got.bytes != expected_bytes) {
    return mismatch(peer + " sent a message of " + std::to_string(got.bytes) + " bytes where this rank expects " +
                    std::to_string(expected_bytes) + " bytes (" + describe_tag(expected_tag) + ")");
  }
  return Status::ok();
}

void set_tag_describer(TagDescriber describer) { g_describer.store(describer ? describer : &hex_tag); }

std::string describe_tag(uint64_t tag) { return g_describer.load()(tag); }

}  // namespace kolo
