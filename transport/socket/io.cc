#include "transport/socket/io.h"

#include <poll.h>

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <thread>

#include <boost/asio/error.hpp>
#include <boost/asio/socket_base.hpp>

#include "transport/socket/congestion.h"

namespace kolo {

namespace asio = boost::asio;

Status wait_fd(int fd, short events, Deadline deadline, const std::string& what) {
  for (;;) {
    struct pollfd p {};
    p.fd = fd;
    p.events = events;
    int n = ::poll(&p, 1, deadline.remaining_ms());
    if (n > 0) return Status::ok();
    if (n == 0) {
      if (deadline.expired()) return timeout_error("timed out " + what);
      continue;
    }
    if (errno == EINTR) continue;
    return errno_error(Code::kTransport, "poll failed " + what, errno);
  }
}

Status write_fully(asio::ip::tcp::socket& socket, const void* data, size_t bytes, Deadline deadline,
                   const std::string& what) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    boost::system::error_code ec;
    size_t n = socket.write_some(asio::buffer(p, bytes), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      KOLO_RETURN_IF_ERROR(wait_fd(socket.native_handle(), POLLOUT, deadline, what));
      continue;
    }
    if (ec) return peer_lost("connection failed " + what + ": " + ec.message());
    p += n;
    bytes -= n;
  }
  return Status::ok();
}

Status read_fully(asio::ip::tcp::socket& socket, void* data, size_t bytes, Deadline deadline,
                  const std::string& what) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    boost::system::error_code ec;
    size_t n = socket.read_some(asio::buffer(p, bytes), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      KOLO_RETURN_IF_ERROR(wait_fd(socket.native_handle(), POLLIN, deadline, what));
      continue;
    }
    if (ec == asio::error::eof) return peer_lost("connection closed by the other side " + what);
    if (ec) return peer_lost("connection failed " + what + ": " + ec.message());
    p += n;
    bytes -= n;
  }
  return Status::ok();
}

Status configure_data_socket(asio::ip::tcp::socket& socket, int buffer_bytes, const std::string& congestion) {
  boost::system::error_code ec;
  socket.set_option(asio::ip::tcp::no_delay(true), ec);
  if (ec) return transport_error("cannot set TCP_NODELAY: " + ec.message());
  if (buffer_bytes > 0) {
    socket.set_option(asio::socket_base::send_buffer_size(buffer_bytes), ec);
    if (ec) return transport_error("cannot set SO_SNDBUF: " + ec.message());
    socket.set_option(asio::socket_base::receive_buffer_size(buffer_bytes), ec);
    if (ec) return transport_error("cannot set SO_RCVBUF: " + ec.message());
  }
  KOLO_RETURN_IF_ERROR(apply_congestion_control(socket.native_handle(), congestion));
  socket.non_blocking(true, ec);
  if (ec) return transport_error("cannot make socket non-blocking: " + ec.message());
  return Status::ok();
}

Status connect_with_retry(asio::io_context& io, const asio::ip::tcp::endpoint& endpoint, Deadline deadline,
                          const std::string& what, std::unique_ptr<asio::ip::tcp::socket>* out) {
  int backoff_ms = 5;
  for (;;) {
    auto socket = std::make_unique<asio::ip::tcp::socket>(io);
    boost::system::error_code ec;
    socket->open(endpoint.protocol(), ec);
    if (!ec) socket->non_blocking(true, ec);
    if (ec) return transport_error("cannot create a socket: " + ec.message());
    int rc = ::connect(socket->native_handle(), endpoint.data(), static_cast<socklen_t>(endpoint.size()));
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      Status w = wait_fd(socket->native_handle(), POLLOUT, deadline, what);
      if (!w.is_ok()) return timeout_error(what + ": no connection before the deadline");
      socklen_t len = sizeof(err);
      ::getsockopt(socket->native_handle(), SOL_SOCKET, SO_ERROR, &err, &len);
    }
    if (err == 0) {
      socket->set_option(asio::ip::tcp::no_delay(true), ec);
      *out = std::move(socket);
      return Status::ok();
    }
    if (deadline.expired()) return timeout_error(what + ": no connection before the deadline");
    std::this_thread::sleep_for(std::chrono::milliseconds(std::min(backoff_ms, deadline.remaining_ms())));
    backoff_ms = std::min(backoff_ms * 2, 100);
  }
}

}  // namespace kolo
