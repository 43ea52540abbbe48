#include "transport/handshake.h"

namespace kolo {

Hello make_hello(uint64_t job_id, int from, int to, int world_size, int stream_index, int stream_count,
                 uint32_t flags) {
  Hello h{};
  h.magic = kHelloMagic;
  h.version = kProtocolVersion;
  h.job_id = job_id;
  h.from_rank = from;
  h.to_rank = to;
  h.world_size = world_size;
  h.stream_index = stream_index;
  h.stream_count = stream_count;
  h.flags = flags;
  return h;
}

Status check_hello(const Hello& h, const HelloExpectation& e) {
  if (h.magic != kHelloMagic) return auth_error("not a kolo connection (bad magic)");
  if (h.version != kProtocolVersion) {
    return invalid_usage("peer speaks protocol version " + std::to_string(h.version) + ", this rank " +
                         std::to_string(kProtocolVersion));
  }
  if (h.job_id != e.job_id) return auth_error("connection from a different job");
  if (h.world_size != e.world_size) {
    return mismatch("peer believes the world has " + std::to_string(h.world_size) + " ranks, this rank " +
                    std::to_string(e.world_size));
  }
  if (h.to_rank != e.rank) {
    return invalid_usage("connection meant for rank " + std::to_string(h.to_rank) + " reached rank " +
                         std::to_string(e.rank));
  }
  if (h.from_rank < 0 || h.from_rank >= e.world_size || h.from_rank == e.rank) {
    return invalid_usage("connection claims impossible rank " + std::to_string(h.from_rank));
  }
  if (h.stream_count != e.stream_count) {
    return mismatch("peer uses " + std::to_string(h.stream_count) + " sockets per peer, this rank " +
                    std::to_string(e.stream_count) + " (set KOLO_SOCKETS_PER_PEER alike on every rank)");
  }
  if (h.flags != e.flags) {
    return mismatch(std::string("peer ") + ((h.flags & kHelloFlagChecksum) ? "checksums" : "does not checksum") +
                    " frame payloads and this rank " + ((e.flags & kHelloFlagChecksum) ? "does" : "does not") +
                    " (set KOLO_CHECKSUM alike on every rank)");
  }
  if (h.stream_index < 0 || h.stream_index >= h.stream_count) {
    return invalid_usage("bad socket index " + std::to_string(h.stream_index));
  }
  return Status::ok();
}

uint64_t job_id_from_name(const std::string& name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace kolo
