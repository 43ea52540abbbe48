// Textual TCP endpoints ("10.0.0.1:4000", "[::1]:4000", "host:4000") as they
// travel through the rendezvous store and appear in error messages.
#pragma once

#include <string>

#include <boost/asio/ip/tcp.hpp>

#include "common/deadline.h"
#include "common/status.h"

namespace kolo {

std::string format_endpoint(const boost::asio::ip::tcp::endpoint& ep);

// Splits "host:port"; the host may be a name, an IPv4 or a bracketed IPv6.
Status split_host_port(const std::string& text, std::string* host, int* port);

// The first IPv4 address (else IPv6) of a network interface such as "eth0".
Status interface_address(const std::string& ifname, std::string* address);

// Resolves a host name or literal to an endpoint (first IPv4 result preferred).
Status resolve_endpoint(const std::string& host, int port, boost::asio::ip::tcp::endpoint* out);

}  // namespace kolo
