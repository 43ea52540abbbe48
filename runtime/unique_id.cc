#include "runtime/unique_id.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <cstdint>
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
  uint8_t version;   // 1
  uint8_t pad;
  uint16_t port;     // host order: the id never leaves the job's machines' ABI
  char address[64];  // NUL-terminated
  char job[16];      // hex
  char secret[40];   // 20 random bytes, hex, NUL-terminated
};
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
  id.version = 1;
  const std::string address = reachable_address(config);
  if (address.size() >= sizeof(id.address)) return invalid_argument("bind address '" + address + "' is too long");
  std::memcpy(id.address, address.data(), address.size());
  const std::string job = hex(random_bytes(8));
  std::memcpy(id.job, job.data(), sizeof(id.job));
  const std::string secret = hex(random_bytes(19));
  std::memcpy(id.secret, secret.data(), secret.size());
  int port = 0;
  KOLO_RETURN_IF_ERROR(Rendezvous::reserve_server(address, job_id_from_name(job_name(id)), secret, &port));
  id.port = static_cast<uint16_t>(port);
  std::memcpy(out, &id, sizeof(id));
  return Status::ok();
}

Status read_unique_id(const char* bytes, UniqueIdFields* out) {
  Layout id;
  std::memcpy(&id, bytes, sizeof(id));
  if (std::memcmp(id.magic, "KLID", 4) != 0 || id.version != 1 ||
      std::memchr(id.address, 0, sizeof(id.address)) == nullptr ||
      std::memchr(id.secret, 0, sizeof(id.secret)) == nullptr || id.port == 0) {
    return invalid_argument("id is not a kolo unique id (made by kolo_get_unique_id)");
  }
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
