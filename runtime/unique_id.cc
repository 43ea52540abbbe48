#include "runtime/unique_id.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/hmac.h"
#include "runtime/launch_env.h"
#include "runtime/rendezvous.h"
#include "transport/handshake.h"
#include "transport/socket/address.h"

namespace kolo {
namespace {

// The id's layout in its 128 bytes.
struct Layout {
  char magic[4];     // "KLID"
  uint8_t version;   // 2
  uint8_t kind;      // kNewJob or kGrow
  uint16_t port;     // host order: the id never leaves the job's machines' ABI
  char address[48];  // NUL-terminated
  char job[16];      // hex: a new job's name; a grow's job id (the store's)
  char secret[40];   // 19 random bytes, hex, NUL-terminated
  char token[16];    // a grow's: hex, names the grow's place in the store
};
constexpr uint8_t kLayoutVersion = 2;
constexpr uint8_t kNewJob = 0;
constexpr uint8_t kGrow = 1;
static_assert(sizeof(Layout) <= kUniqueIdBytes, "the id fits its bytes");

std::string hex(const std::string& bytes) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
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

// Where rank 0's store listens: what other hosts reach.
std::string reachable_address(const Config& config) {
  if (!config.bind_address.empty()) return config.bind_address;
  std::string address;
  const std::string route = default_route_interface();
  if (!route.empty() && interface_address(route, &address).is_ok() && !address.empty()) return address;
  address = first_non_loopback_ipv4();
  return address.empty() ? "127.0.0.1" : address;
}

std::string job_name(const Layout& id) { return "uid-" + std::string(id.job, sizeof(id.job)); }

}  // namespace

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

Status make_unique_id(const Config& config, char* out) {
  std::memset(out, 0, kUniqueIdBytes);
  Layout id{};
  std::memcpy(id.magic, "KLID", 4);
  id.version = kLayoutVersion;
  id.kind = kNewJob;
  const std::string address = reachable_address(config);
  if (address.size() >= sizeof(id.address)) return invalid_argument("bind address '" + address + "' is too long");
  std::memcpy(id.address, address.data(), address.size());
  const std::string job = hex(random_bytes(8));
  std::memcpy(id.job, job.data(), sizeof(id.job));
  const std::string secret = hex(random_bytes(19));
  std::memcpy(id.secret, secret.data(), secret.size());
  int port = 0;
  KOLO_RETURN_IF_ERROR(
      Rendezvous::reserve_server(address, job_id_from_name(job_name(id)), secret, config.encrypt, &port));
  id.port = static_cast<uint16_t>(port);
  std::memcpy(out, &id, sizeof(id));
  return Status::ok();
}

namespace {

Status read_layout(const char* bytes, uint8_t kind, Layout* id) {
  std::memcpy(id, bytes, sizeof(*id));
  if (std::memcmp(id->magic, "KLID", 4) != 0 || id->version != kLayoutVersion ||
      std::memchr(id->address, 0, sizeof(id->address)) == nullptr ||
      std::memchr(id->secret, 0, sizeof(id->secret)) == nullptr || id->port == 0 ||
      (id->kind != kNewJob && id->kind != kGrow)) {
    return invalid_argument("id is not a kolo unique id (made by kolo_get_unique_id or kolo_comm_get_unique_id)");
  }
  if (id->kind != kind) {
    return invalid_argument(kind == kGrow ? "id is a new job's (kolo_get_unique_id), not a grow's "
                                            "(kolo_comm_get_unique_id): joining ranks pass a grow's"
                                          : "id is a grow's (kolo_comm_get_unique_id): a new job's ranks pass one "
                                            "made by kolo_get_unique_id");
  }
  return Status::ok();
}

std::string grow_id_key(const std::string& token) { return "grow-id/" + token; }

}  // namespace

Status make_grow_id(const Communicator& comm, char* out) {
  std::memset(out, 0, kUniqueIdBytes);
  const Membership& m = comm.membership();
  const Rendezvous::Location* where = m.rendezvous ? m.rendezvous->location() : nullptr;
  if (!where) {
    return unsupported("this communicator's rendezvous store is not one kolo serves (torchrun's agent store, or "
                       "the caller's own): no id can lead new ranks to it");
  }
  Layout id{};
  std::memcpy(id.magic, "KLID", 4);
  id.version = kLayoutVersion;
  id.kind = kGrow;
  if (where->host.size() >= sizeof(id.address)) {
    return invalid_argument("the store's address '" + where->host + "' is too long for an id");
  }
  if (where->secret.size() >= sizeof(id.secret)) {
    return invalid_argument("KOLO_SECRET is longer than " + std::to_string(sizeof(id.secret) - 1) +
                            " characters: it cannot travel in an id");
  }
  std::memcpy(id.address, where->host.data(), where->host.size());
  id.port = static_cast<uint16_t>(where->port);
  char job[17];
  std::snprintf(job, sizeof(job), "%016llx", static_cast<unsigned long long>(where->job_id));
  std::memcpy(id.job, job, sizeof(id.job));
  std::memcpy(id.secret, where->secret.data(), where->secret.size());
  const std::string token = hex(random_bytes(8));
  std::memcpy(id.token, token.data(), sizeof(id.token));
  // The grow's place, which only the communicator's ranks know, waits in
  // the store for the ranks that join.
  const Communicator::GrowPlace place = comm.next_grow();
  KOLO_RETURN_IF_ERROR(m.rendezvous->store()->set(grow_id_key(token), place.store_path + "\n" + place.job_name));
  std::memcpy(out, &id, sizeof(id));
  return Status::ok();
}

Status join_grow_id(const char* bytes, int rank, int nranks, Config config, std::unique_ptr<Communicator>* out) {
  Layout id;
  KOLO_RETURN_IF_ERROR(read_layout(bytes, kGrow, &id));
  Rendezvous::Location where;
  where.host = id.address;
  where.port = id.port;
  where.job_id = std::strtoull(std::string(id.job, sizeof(id.job)).c_str(), nullptr, 16);
  where.secret = id.secret;
  where.encrypt = config.encrypt;
  std::shared_ptr<Rendezvous> rendezvous;
  KOLO_RETURN_IF_ERROR(Rendezvous::join(where, config.timeout_s, &rendezvous));
  std::string place_text;
  KOLO_RETURN_IF_ERROR(rendezvous->store()
                           ->get_one(grow_id_key(std::string(id.token, sizeof(id.token))),
                                     Deadline::after_seconds(config.timeout_s), &place_text)
                           .with_context("the grow's id names no grow of the job at " + where.host + ":" +
                                         std::to_string(where.port)));
  const size_t newline = place_text.find('\n');
  if (newline == std::string::npos) return internal_error("the grow's place in the store is damaged");
  const Communicator::GrowPlace place{place_text.substr(0, newline), place_text.substr(newline + 1)};
  config.secret = where.secret;
  return Communicator::join_grown(rendezvous, place, rank, nranks, config, out);
}

Status read_unique_id(const char* bytes, UniqueIdFields* out) {
  Layout id;
  KOLO_RETURN_IF_ERROR(read_layout(bytes, kNewJob, &id));
  out->address = id.address;
  out->port = id.port;
  out->job_name = job_name(id);
  out->secret = id.secret;
  return Status::ok();
}

Status join_unique_id(const char* bytes, int rank, int nranks, Config config, std::unique_ptr<Communicator>* out) {
  UniqueIdFields id;
  KOLO_RETURN_IF_ERROR(read_unique_id(bytes, &id));
  config.secret = id.secret;
  config.job_id = id.job_name;
  LaunchInfo info;
  info.rank = rank;
  info.world_size = nranks;
  info.master_addr = id.address;
  info.master_port = id.port;
  info.source = "kolo_comm_init_rank";
  return Communicator::create(info, config, out);
}

}  // namespace kolo
