#include "transport/socket/congestion.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace kolo {

namespace {

bool set_algorithm(int fd, const std::string& name, int* error) {
  if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name.data(), static_cast<socklen_t>(name.size())) == 0) {
    return true;
  }
  *error = errno;
  return false;
}

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

bool same_address(const sockaddr* a, const sockaddr_storage& b) {
  if (a == nullptr || a->sa_family != b.ss_family) return false;
  if (a->sa_family == AF_INET) {
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in&>(b).sin_addr.s_addr;
  }
  if (a->sa_family == AF_INET6) {
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6&>(b).sin6_addr, sizeof(in6_addr)) == 0;
  }
  return false;
}

// Whether the setting names an algorithm, rather than leaving the choice
// to kolo ("auto", or empty) or to the system ("system").
bool names_an_algorithm(const std::string& setting) {
  return !setting.empty() && setting != "auto" && setting != "system";
}

// A name the kernel would not set, and what it would.
Status refused(const std::string& setting, int error) {
  return invalid_argument("KOLO_TCP_CONGESTION=" + setting + ": the kernel refused it (" + std::strerror(error) +
                          "); it has: " + first_line("/proc/sys/net/ipv4/tcp_available_congestion_control") +
                          "; a process without CAP_NET_ADMIN may choose: " +
                          first_line("/proc/sys/net/ipv4/tcp_allowed_congestion_control") +
                          "; `auto` or `system` never fail");
}

}  // namespace

std::string congestion_control_of(int fd) {
  char name[32] = {};
  socklen_t length = sizeof(name) - 1;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &length) != 0) return "";
  return std::string(name, strnlen(name, length));
}

bool is_this_hosts_address(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) {
    const in_addr_t a = ntohl(reinterpret_cast<const sockaddr_in&>(address).sin_addr.s_addr);
    if ((a >> 24) == 127) return true;  // 127.0.0.0/8
  } else if (address.ss_family == AF_INET6) {
    const in6_addr& a = reinterpret_cast<const sockaddr_in6&>(address).sin6_addr;
    if (IN6_IS_ADDR_LOOPBACK(&a)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
      // A dual-stack socket's IPv4 peer: compared as the IPv4 address it is.
      sockaddr_storage four{};
      auto& v4 = reinterpret_cast<sockaddr_in&>(four);
      v4.sin_family = AF_INET;
      std::memcpy(&v4.sin_addr, &a.s6_addr[12], sizeof(v4.sin_addr));
      return is_this_hosts_address(four);
    }
  } else {
    return false;
  }
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return false;
  bool found = false;
  for (const ifaddrs* i = list; i != nullptr && !found; i = i->ifa_next) found = same_address(i->ifa_addr, address);
  ::freeifaddrs(list);
  return found;
}

bool connects_this_host(int fd) {
  sockaddr_storage remote{};
  socklen_t length = sizeof(remote);
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &length) != 0) return false;
  return is_this_hosts_address(remote);
}

std::string congestion_control_for(const std::string& setting, bool this_host) {
  if (names_an_algorithm(setting)) return setting;
  // Reno is built into every Linux kernel and allowed to every user, and
  // does not pace.
  if (this_host && setting != "system") return "reno";
  return first_line("/proc/sys/net/ipv4/tcp_congestion_control");
}

void begin_congestion_control(int fd, const std::string& algorithm) {
  int ignored = 0;
  if (!algorithm.empty()) set_algorithm(fd, algorithm, &ignored);
}

Status check_congestion_setting(const std::string& setting) {
  if (!names_an_algorithm(setting)) return Status::ok();
  const int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  if (probe < 0) return Status::ok();  // the transport's own sockets will say why
  int error = 0;
  const bool taken = set_algorithm(probe, setting, &error);
  ::close(probe);
  return taken ? Status::ok() : refused(setting, error);
}

Status apply_congestion_control(int fd, const std::string& setting) {
  const std::string algorithm = congestion_control_for(setting, connects_this_host(fd));
  if (algorithm.empty() || congestion_control_of(fd) == algorithm) return Status::ok();
  int error = 0;
  if (set_algorithm(fd, algorithm, &error)) return Status::ok();
  if (!names_an_algorithm(setting)) return Status::ok();
  return refused(setting, error);
}

}  // namespace kolo
