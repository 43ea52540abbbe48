#include "transport/socket/address.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <cerrno>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>

namespace kolo {

namespace asio = boost::asio;
using asio::ip::tcp;

std::string format_endpoint(const tcp::endpoint& ep) {
  if (ep.address().is_v6()) return "[" + ep.address().to_string() + "]:" + std::to_string(ep.port());
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

Status split_host_port(const std::string& text, std::string* host, int* port) {
  std::string h, p;
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return invalid_argument("bad address '" + text + "' (expected [ipv6]:port)");
    }
    h = text.substr(1, close - 1);
    p = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string::npos) return invalid_argument("bad address '" + text + "' (expected host:port)");
    h = text.substr(0, colon);
    p = text.substr(colon + 1);
  }
  char* end = nullptr;
  long v = std::strtol(p.c_str(), &end, 10);
  if (h.empty() || p.empty() || *end != '\0' || v < 0 || v > 65535) {
    return invalid_argument("bad address '" + text + "' (expected host:port with port 0-65535)");
  }
  *host = h;
  *port = static_cast<int>(v);
  return Status::ok();
}

Status interface_address(const std::string& ifname, std::string* address) {
  struct ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return errno_error(Code::kTransport, "getifaddrs", errno);
  std::string v4, v6, seen;
  for (struct ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr) continue;
    const int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (seen.find(std::string(" ") + it->ifa_name + " ") == std::string::npos) {
      seen += std::string(" ") + it->ifa_name + " ";
    }
    if (ifname != it->ifa_name) continue;
    char text[INET6_ADDRSTRLEN] = {0};
    const void* raw = family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(it->ifa_addr)->sin6_addr);
    ::inet_ntop(family, raw, text, sizeof(text));
    if (family == AF_INET && v4.empty()) v4 = text;
    if (family == AF_INET6 && v6.empty()) v6 = text;
  }
  ::freeifaddrs(list);
  if (!v4.empty() || !v6.empty()) {
    *address = v4.empty() ? v6 : v4;
    return Status::ok();
  }
  return invalid_argument("KOLO_IFNAME='" + ifname + "': no such interface with an IP address (interfaces:" + seen +
                          ")");
}

Status resolve_endpoint(const std::string& host, int port, tcp::endpoint* out) {
  boost::system::error_code ec;
  auto literal = asio::ip::make_address(host, ec);
  if (!ec) {
    *out = tcp::endpoint(literal, static_cast<unsigned short>(port));
    return Status::ok();
  }
  asio::io_context ctx;
  tcp::resolver resolver(ctx);
  auto results = resolver.resolve(host, std::to_string(port), ec);
  if (ec || results.empty()) {
    return invalid_argument("cannot resolve host '" + host + "': " + (ec ? ec.message() : "no address"));
  }
  for (const auto& r : results) {
    if (r.endpoint().address().is_v4()) {
      *out = r.endpoint();
      return Status::ok();
    }
  }
  *out = results.begin()->endpoint();
  return Status::ok();
}

}  // namespace kolo
