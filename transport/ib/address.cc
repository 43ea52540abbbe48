#include "transport/ib/address.h"

#include <algorithm>
#include <cstring>

#include "transport/handshake.h"

namespace kolo {

namespace {

// enum ibv_mtu: IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5.
constexpr uint8_t kMinMtu = 1;
constexpr uint8_t kMaxMtu = 5;

}  // namespace

std::string encode_ib_address(const IbAddress& address) {
  IbAddress a = address;
  a.magic = kIbAddressMagic;
  a.version = kIbProtocolVersion;
  return std::string(reinterpret_cast<const char*>(&a), sizeof(a));
}

Status decode_ib_address(const std::string& bytes, const IbExpectation& e, IbAddress* out) {
  if (bytes.size() != sizeof(IbAddress)) {
    return invalid_usage("RDMA address has " + std::to_string(bytes.size()) + " bytes, expected " +
                         std::to_string(sizeof(IbAddress)));
  }
  IbAddress a;
  std::memcpy(&a, bytes.data(), sizeof(a));
  KOLO_RETURN_IF_ERROR(check_peer_identity({a.magic, a.version, a.job_id, a.world_size},
                                           {kIbAddressMagic, kIbProtocolVersion, e.job_id, e.world_size},
                                           "RDMA address", "RDMA protocol"));
  if (a.from_rank != e.peer || a.to_rank != e.rank) {
    return invalid_usage("RDMA address from rank " + std::to_string(a.from_rank) + " to rank " +
                         std::to_string(a.to_rank) + " read where rank " + std::to_string(e.peer) + " to rank " +
                         std::to_string(e.rank) + " was expected");
  }
  if (a.psn > 0xffffff) return invalid_usage("RDMA address has a PSN over 24 bits: " + std::to_string(a.psn));
  if (a.mtu < kMinMtu || a.mtu > kMaxMtu) return invalid_usage("RDMA address has MTU code " + std::to_string(a.mtu));
  if (a.qp_num == 0 || a.qp_num > 0xffffff) {
    return invalid_usage("RDMA address has an impossible QP number " + std::to_string(a.qp_num));
  }
  *out = a;
  return Status::ok();
}

uint8_t common_mtu(uint8_t a, uint8_t b) { return std::min(a, b); }

}  // namespace kolo
