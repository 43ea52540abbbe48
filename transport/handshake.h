// The first bytes on every connection between two ranks. The connecting side
// sends a Hello; the accepting side checks it and answers with a HelloAck.
// Anything that is not a Hello from a member of this job, addressed to this
// rank, is rejected before it can touch a collective.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace kolo {

constexpr uint32_t kHelloMagic = 0x4b4f4c48;  // "KOLH"
constexpr uint32_t kProtocolVersion = 1;

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint64_t job_id;
  int32_t from_rank;
  int32_t to_rank;
  int32_t world_size;
  int32_t stream_index;  // which of the pair's parallel sockets this is
  int32_t stream_count;
  uint32_t flags;  // kHelloFlag* options that both ends must share
};

constexpr uint32_t kHelloFlagChecksum = 1;  // frame payloads carry a CRC-32C
static_assert(sizeof(Hello) == 40, "Hello is a wire format");

struct HelloAck {
  uint32_t magic;
  int32_t code;  // a Code; kOk when accepted
};
static_assert(sizeof(HelloAck) == 8, "HelloAck is a wire format");

// What the accepting rank knows about itself, to judge a Hello against.
struct HelloExpectation {
  uint64_t job_id;
  int32_t rank;
  int32_t world_size;
  int32_t stream_count;
  uint32_t flags;
};

Hello make_hello(uint64_t job_id, int from, int to, int world_size, int stream_index, int stream_count,
                 uint32_t flags = 0);
Status check_hello(const Hello& hello, const HelloExpectation& expected);

// Stable 64-bit identity of a job from its name (FNV-1a).
uint64_t job_id_from_name(const std::string& name);

}  // namespace kolo
