#include "transport/tcp/address.h"

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
