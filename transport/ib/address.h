// What a rank publishes in the rendezvous store for the queue pair it made
// for one peer: what the peer needs to move its own queue pair to
// ready-to-receive (QP number, first packet sequence number, LID for
// InfiniBand, GID for RoCE, MTU), wrapped in the identity checks TCP's
// handshake makes (protocol version, job, world size, which rank to which).
// The store itself is authenticated with the job secret, so an address read
// from it is as trustworthy as a TCP Hello that passed its MAC.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace kolo {

constexpr uint32_t kIbAddressMagic = 0x4b4f4c49;  // "KOLI"
constexpr uint32_t kIbProtocolVersion = 1;

struct IbAddress {
  uint32_t magic;
  uint32_t version;
  uint64_t job_id;
  int32_t from_rank;
  int32_t to_rank;
  int32_t world_size;
  uint32_t qp_num;
  uint32_t psn;  // first packet sequence number (24 bits)
  uint16_t lid;  // InfiniBand local identifier; 0 on RoCE
  uint8_t port;
  uint8_t mtu;   // enum ibv_mtu of the active port
  uint8_t gid[16];
  int32_t gid_index;
};
static_assert(sizeof(IbAddress) == 64, "IbAddress is a wire format");

// What the reading rank expects of an address meant for it.
struct IbExpectation {
  uint64_t job_id;
  int32_t rank;        // this rank: the address's to_rank
  int32_t peer;        // the rank it must come from
  int32_t world_size;
};

std::string encode_ib_address(const IbAddress& address);
// Decodes and checks: a wrong size or magic, another protocol version, job,
// world size or pair of ranks, a PSN over 24 bits or an impossible MTU is an
// error naming what differed.
Status decode_ib_address(const std::string& bytes, const IbExpectation& expected, IbAddress* out);

// The MTU both ends of a queue pair must use: the smaller of the two.
uint8_t common_mtu(uint8_t a, uint8_t b);

}  // namespace kolo
