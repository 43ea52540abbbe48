// kolo_config_t, kolo_get_unique_id and kolo_comm_init_rank (NCCL's
// ncclConfig_t, ncclGetUniqueId and ncclCommInitRank).
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "bindings/c/api_support.h"
#include "bindings/c/config_from_c.h"
#include "bindings/c/kolo.h"
#include "common/env.h"
#include "common/hmac.h"
#include "common/log.h"
#include "runtime/communicator.h"
#include "runtime/config.h"
#include "runtime/launch_env.h"
#include "runtime/rendezvous.h"
#include "transport/handshake.h"
#include "transport/socket/address.h"

using kolo_c::guarded;

namespace {

// What each KOLO_CONFIG_VERSION's struct holds: its size on this ABI.
constexpr size_t kConfigV1Size = sizeof(kolo_config_t);

// The unique id's layout in its 128 bytes.
struct UniqueId {
  char magic[4];     // "KLID"
  uint8_t version;   // 1
  uint8_t pad;
  uint16_t port;     // host order: the id never leaves the job's machines' ABI
  char address[64];  // NUL-terminated
  char job[16];      // hex
  char secret[40];   // 20 random bytes, hex, NUL-terminated
};
static_assert(sizeof(UniqueId) <= KOLO_UNIQUE_ID_BYTES, "the id fits kolo_unique_id_t");

std::string hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

// The interface of the default route (/proc/net/route), if any.
std::string default_route_interface() {
  std::ifstream routes("/proc/net/route");
  std::string line;
  std::getline(routes, line);  // header
  while (std::getline(routes, line)) {
    std::istringstream fields(line);
    std::string ifname, destination, gateway, flags, refcnt, use, metric, mask;
    if (!(fields >> ifname >> destination >> gateway >> flags >> refcnt >> use >> metric >> mask)) continue;
    if (destination == "00000000" && mask == "00000000") return ifname;
  }
  return "";
}

std::string first_non_loopback_ipv4() {
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return "";
  std::string found;
  for (ifaddrs* a = list; a && found.empty(); a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || (a->ifa_flags & IFF_LOOPBACK) || !(a->ifa_flags & IFF_UP)) {
      continue;
    }
    char text[INET_ADDRSTRLEN] = {0};
    if (::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(a->ifa_addr)->sin_addr, text, sizeof(text))) found = text;
  }
  ::freeifaddrs(list);
  return found;
}

// Where rank 0's store listens: what other hosts reach (see kolo.h).
kolo::Status unique_id_address(std::string* address) {
  *address = kolo::env_string("KOLO_BIND_ADDR").value_or("");
  if (!address->empty()) return kolo::Status::ok();
  if (auto ifname = kolo::env_string("KOLO_IFNAME")) return kolo::interface_address(*ifname, address);
  const std::string route = default_route_interface();
  if (!route.empty() && kolo::interface_address(route, address).is_ok() && !address->empty()) {
    return kolo::Status::ok();
  }
  *address = first_non_loopback_ipv4();
  if (address->empty()) *address = "127.0.0.1";
  return kolo::Status::ok();
}

kolo::Status decode_id(const kolo_unique_id_t* id, UniqueId* out) {
  std::memcpy(out, id->internal, sizeof(*out));
  if (std::memcmp(out->magic, "KLID", 4) != 0 || out->version != 1 ||
      std::memchr(out->address, 0, sizeof(out->address)) == nullptr ||
      std::memchr(out->secret, 0, sizeof(out->secret)) == nullptr || out->port == 0) {
    return kolo::invalid_argument("id is not a kolo unique id (made by kolo_get_unique_id)");
  }
  return kolo::Status::ok();
}

std::string job_name(const UniqueId& u) { return "uid-" + std::string(u.job, sizeof(u.job)); }

bool is_set(int64_t v) { return v != KOLO_CONFIG_UNSET_INT; }
bool is_set(double v) { return v != KOLO_CONFIG_UNSET_DOUBLE; }

kolo::Status set_int(const char* field, int64_t v, kolo::Limit limit, int64_t* out) {
  if (!is_set(v)) return kolo::Status::ok();
  KOLO_RETURN_IF_ERROR(kolo::check_limit(std::string("config.") + field, static_cast<double>(v), limit));
  *out = v;
  return kolo::Status::ok();
}

kolo::Status set_bool(const char* field, int64_t v, bool* out) {
  if (!is_set(v)) return kolo::Status::ok();
  KOLO_RETURN_IF_ERROR(kolo::check_limit(std::string("config.") + field, static_cast<double>(v), kolo::limits::boolean));
  *out = v != 0;
  return kolo::Status::ok();
}

kolo::Status set_double(const char* field, double v, kolo::Limit limit, double* out) {
  if (!is_set(v)) return kolo::Status::ok();
  KOLO_RETURN_IF_ERROR(kolo::check_limit(std::string("config.") + field, v, limit));
  *out = v;
  return kolo::Status::ok();
}

void set_string(const char* v, std::string* out) {
  if (v) *out = v;
}

}  // namespace

namespace kolo_c {

kolo::Status config_from_c(const kolo_config_t* given, kolo::Config* c) {
  KOLO_RETURN_IF_ERROR(kolo::load_config(c));
  if (!given) return kolo::Status::ok();
  if (given->version < 1 || given->version > KOLO_CONFIG_VERSION) {
    return kolo::invalid_argument("config.version = " + std::to_string(given->version) + ": this library knows 1 to " +
                                  std::to_string(KOLO_CONFIG_VERSION) + " (start from KOLO_CONFIG_INITIALIZER)");
  }
  const size_t needed = kConfigV1Size;  // every version so far: 1
  if (given->size < needed) {
    return kolo::invalid_argument("config.size = " + std::to_string(given->size) + ": version " +
                                  std::to_string(given->version) + " needs at least " + std::to_string(needed) +
                                  " (start from KOLO_CONFIG_INITIALIZER)");
  }
  // Fields beyond what the caller's version holds stay unset.
  kolo_config_t f = KOLO_CONFIG_INITIALIZER;
  std::memcpy(&f, given, std::min(given->size, sizeof(f)));
  namespace L = kolo::limits;
  KOLO_RETURN_IF_ERROR(set_double("timeout_s", f.timeout_s, L::timeout_s, &c->timeout_s));
  KOLO_RETURN_IF_ERROR(set_int("segment_bytes", f.segment_bytes, L::segment_bytes, &c->segment_bytes));
  KOLO_RETURN_IF_ERROR(set_int("pipeline_depth", f.pipeline_depth, L::pipeline_depth, &c->pipeline_depth));
  KOLO_RETURN_IF_ERROR(set_int("small_allreduce_bytes", f.small_allreduce_bytes, L::small_allreduce_bytes,
                               &c->small_allreduce_bytes));
  KOLO_RETURN_IF_ERROR(set_int("sockets_per_peer", f.sockets_per_peer, L::sockets_per_peer, &c->sockets_per_peer));
  KOLO_RETURN_IF_ERROR(
      set_int("socket_buffer_bytes", f.socket_buffer_bytes, L::socket_buffer_bytes, &c->socket_buffer_bytes));
  KOLO_RETURN_IF_ERROR(set_int("spin_us", f.spin_us, L::spin_us, &c->spin_us));
  KOLO_RETURN_IF_ERROR(set_int("spin_yield", f.spin_yield, L::spin_yield, &c->spin_yield));
  KOLO_RETURN_IF_ERROR(set_bool("checksum", f.checksum, &c->checksum));
  set_string(f.bind_address, &c->bind_address);
  set_string(f.secret, &c->secret);
  if (f.transport) {
    KOLO_RETURN_IF_ERROR(kolo::check_transport("config.transport", f.transport));
    c->transport = f.transport;
  }
  set_string(f.ib_device, &c->ib_device);
  KOLO_RETURN_IF_ERROR(set_int("ib_port", f.ib_port, L::ib_port, &c->ib_port));
  KOLO_RETURN_IF_ERROR(set_int("ib_gid_index", f.ib_gid_index, L::ib_gid_index, &c->ib_gid_index));
  KOLO_RETURN_IF_ERROR(set_bool("cuda_ipc", f.cuda_ipc, &c->cuda_ipc));
  KOLO_RETURN_IF_ERROR(set_int("fusion_threshold_bytes", f.fusion_threshold_bytes, L::fusion_threshold_bytes,
                               &c->fusion_threshold_bytes));
  KOLO_RETURN_IF_ERROR(set_double("cycle_time_ms", f.cycle_time_ms, L::cycle_time_ms, &c->cycle_time_ms));
  KOLO_RETURN_IF_ERROR(set_int("cache_capacity", f.cache_capacity, L::cache_capacity, &c->cache_capacity));
  set_string(f.timeline_path, &c->timeline_path);
  KOLO_RETURN_IF_ERROR(set_double("stall_warning_s", f.stall_warning_s, L::stall_warning_s, &c->stall_warning_s));
  KOLO_RETURN_IF_ERROR(set_double("stall_shutdown_s", f.stall_shutdown_s, L::stall_shutdown_s, &c->stall_shutdown_s));
  set_string(f.job_id, &c->job_id);
  return kolo::Status::ok();
}

}  // namespace kolo_c

extern "C" {

kolo_result_t kolo_get_unique_id(kolo_unique_id_t* id) {
  return guarded([&] {
    if (!id) return kolo::invalid_argument("id output pointer is NULL");
    std::memset(id, 0, sizeof(*id));
    KOLO_RETURN_IF_ERROR(kolo::load_log_settings());
    UniqueId u{};
    std::memcpy(u.magic, "KLID", 4);
    u.version = 1;
    std::string address;
    KOLO_RETURN_IF_ERROR(unique_id_address(&address));
    if (address.size() >= sizeof(u.address)) return kolo::invalid_argument("bind address '" + address + "' is too long");
    std::memcpy(u.address, address.data(), address.size());
    const std::string job = hex(kolo::random_bytes(8));
    std::memcpy(u.job, job.data(), sizeof(u.job));
    const std::string secret = hex(kolo::random_bytes(19));
    std::memcpy(u.secret, secret.data(), secret.size());
    int port = 0;
    KOLO_RETURN_IF_ERROR(kolo::Rendezvous::reserve_server(address, kolo::job_id_from_name(job_name(u)), secret, &port));
    u.port = static_cast<uint16_t>(port);
    std::memcpy(id->internal, &u, sizeof(u));
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_comm_init_rank(kolo_comm_t* comm, int nranks, const kolo_unique_id_t* id, int rank,
                                  const kolo_config_t* config) {
  return guarded([&] {
    if (!comm) return kolo::invalid_argument("comm output pointer is NULL");
    *comm = nullptr;
    if (!id) return kolo::invalid_argument("id is NULL");
    if (nranks < 1) return kolo::invalid_argument("nranks must be at least 1");
    if (rank < 0 || rank >= nranks) {
      return kolo::invalid_argument("rank " + std::to_string(rank) + " is not in [0, " + std::to_string(nranks) + ")");
    }
    if (config && config->version >= 1 && config->size >= kConfigV1Size) {
      if (config->secret) return kolo::invalid_argument("config.secret is set: the unique id carries the job's secret");
      if (config->job_id) return kolo::invalid_argument("config.job_id is set: the unique id carries the job's id");
    }
    kolo::Config c;
    KOLO_RETURN_IF_ERROR(kolo_c::config_from_c(config, &c));
    UniqueId u;
    KOLO_RETURN_IF_ERROR(decode_id(id, &u));
    c.secret = u.secret;
    c.job_id = job_name(u);
    kolo::LaunchInfo info;
    info.rank = rank;
    info.world_size = nranks;
    info.master_addr = u.address;
    info.master_port = u.port;
    info.source = "kolo_comm_init_rank";
    auto handle = std::make_unique<kolo_comm>();
    KOLO_RETURN_IF_ERROR(kolo::Communicator::create(info, c, &handle->impl));
    *comm = handle.release();
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_comm_init_from_env_config(kolo_comm_t* comm, const kolo_config_t* config) {
  return guarded([&] {
    if (!comm) return kolo::invalid_argument("comm output pointer is NULL");
    *comm = nullptr;
    kolo::Config c;
    KOLO_RETURN_IF_ERROR(kolo_c::config_from_c(config, &c));
    kolo::LaunchInfo info;
    KOLO_RETURN_IF_ERROR(kolo::read_launch_env(&info));
    auto handle = std::make_unique<kolo_comm>();
    KOLO_RETURN_IF_ERROR(kolo::Communicator::create(info, c, &handle->impl));
    *comm = handle.release();
    return kolo::Status::ok();
  });
}

}  // extern "C"
