// The data path's non-blocking I/O on one stream's descriptor, for TcpPair
// and its sealed streams alike.
#pragma once

#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstddef>

namespace kolo {

inline bool would_block(int error) { return error == EAGAIN || error == EWOULDBLOCK; }

// One non-blocking gather write or scatter read, retried on EINTR. Returns
// the bytes moved, or -1 with *error set (0 for a read at end of stream).
inline ssize_t move_bytes(int fd, bool send, iovec* iov, int iovcnt, int* error) {
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = static_cast<size_t>(iovcnt);
  for (;;) {
    const ssize_t n = send ? ::sendmsg(fd, &msg, MSG_NOSIGNAL) : ::recvmsg(fd, &msg, 0);
    if (n > 0) return n;
    if (n == 0) {
      *error = 0;
      return -1;
    }
    if (errno == EINTR) continue;
    *error = errno;
    return -1;
  }
}

}  // namespace kolo
