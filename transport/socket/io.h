// Blocking-with-deadline helpers over non-blocking Asio sockets, for the
// handshake and other small exchanges. The data path does not use these; it
// multiplexes sockets in TcpPair.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

#include <boost/asio/ip/tcp.hpp>

#include "common/deadline.h"
#include "common/status.h"

namespace kolo {

// Waits until `fd` is ready for `events` (POLLIN/POLLOUT) or the deadline.
Status wait_fd(int fd, short events, Deadline deadline, const std::string& what);

Status write_fully(boost::asio::ip::tcp::socket& socket, const void* data, size_t bytes, Deadline deadline,
                   const std::string& what);
Status read_fully(boost::asio::ip::tcp::socket& socket, void* data, size_t bytes, Deadline deadline,
                  const std::string& what);

// Applies the data-path socket options: TCP_NODELAY, buffer sizes (0 keeps
// the kernel's autotuning), non-blocking mode.
Status configure_data_socket(boost::asio::ip::tcp::socket& socket, int buffer_bytes);

}  // namespace kolo
