// Blocking-with-deadline helpers over non-blocking Asio sockets, for the
// handshake and other small exchanges. The data path does not use these; it
// multiplexes sockets in TcpPair.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>
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

// Connects to a server that may not be listening yet (a store whose process
// is still starting): refused connections are retried, backing off from 5
// to at most 100 ms, until the deadline (then kTimeout). The socket comes
// back connected, non-blocking, with TCP_NODELAY.
Status connect_with_retry(boost::asio::io_context& io, const boost::asio::ip::tcp::endpoint& endpoint,
                          Deadline deadline, const std::string& what,
                          std::unique_ptr<boost::asio::ip::tcp::socket>* out);

// Applies the data-path socket options: TCP_NODELAY, buffer sizes (0 keeps
// the kernel's autotuning), the congestion control (KOLO_TCP_CONGESTION's
// value; congestion.h), non-blocking mode.
Status configure_data_socket(boost::asio::ip::tcp::socket& socket, int buffer_bytes, const std::string& congestion);

}  // namespace kolo
