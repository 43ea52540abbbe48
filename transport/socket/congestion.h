// Which TCP congestion control a data connection runs (KOLO_TCP_CONGESTION).
//
// Between two ranks of one host the connection never leaves the kernel:
// there is no network to share and nothing to pace for, and an algorithm
// that paces its sends (BBR, the default on some distributions' kernels)
// only delays them. On a 2-core VM whose kernel defaults to BBR, two
// loopback streams carried 6.0-6.7 GB/s under it and 11.5-11.8 under
// CUBIC, and allreduce over TCP ran 1.3-1.7x faster with its connections
// switched to Reno (docs/performance-log.md, "Congestion control on
// loopback"). So by default ("auto") a connection between two addresses of
// one host runs Reno, and a connection to another host the system's
// choice, which its network's operators made.
#pragma once

#include <sys/socket.h>

#include <string>

#include "common/status.h"

namespace kolo {

// The algorithm a connection runs under the setting:
//   "auto"    a connection within this host: reno; one to another host: the
//             system's default
//   "system"  the system's default (net.ipv4.tcp_congestion_control, read
//             in this network namespace)
//   a name    that one ("cubic", "bbr", ...)
std::string congestion_control_for(const std::string& setting, bool this_host);

// Sets the algorithm a socket's connection begins with, before connect()
// (or listen(): accepted connections inherit it). Best effort: a refusal
// is reported by apply_congestion_control once connected. It matters: a
// connection switched later from BBR keeps pacing its sends (BBR asks the
// kernel to pace and nothing asks it to stop), and measured 20-40% slower
// on loopback than one that began under Reno or CUBIC.
void begin_congestion_control(int fd, const std::string& algorithm);

// Whether the kernel takes the setting's algorithm, tried on a socket of
// its own: an error naming the setting and what the kernel has, or OK
// ("auto" and "system" always).
Status check_congestion_setting(const std::string& setting);

// Once connected (or accepted): makes the connection run what the setting
// says for it. A name the kernel refuses is an error naming the setting and
// what the kernel offers; "auto" and "system" never fail (at worst the
// connection keeps what it has).
Status apply_congestion_control(int fd, const std::string& setting);

// The algorithm `fd` runs ("" if the kernel does not say).
std::string congestion_control_of(int fd);

// Whether an address is this host's: a loopback address or one of its
// interfaces' (in its network namespace, as an emulated host has its own).
// The kernel carries a connection to it over its loopback device, whatever
// the address.
bool is_this_hosts_address(const sockaddr_storage& address);

// Whether a connected socket's other end is an address of this host.
bool connects_this_host(int fd);

}  // namespace kolo
