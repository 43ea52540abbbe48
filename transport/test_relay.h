// For tests: a TCP relay on 127.0.0.1 between one client and a server
// (127.0.0.1:target_port) that records what passes each way, can flip one
// byte of either direction (tampering on the wire), and can freeze: then it
// keeps both connections open and passes nothing, as a host that hangs
// (SIGSTOP, a dead NIC) would.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

namespace kolo {

class TcpRelay {
 public:
  enum Direction { kToTarget = 0, kFromTarget = 1 };

  explicit TcpRelay(int target_port) : target_port_(target_port) {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa = loopback(0);
    ::bind(listener_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
    ::listen(listener_, 4);
    socklen_t len = sizeof(sa);
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&sa), &len);
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { relay(); });
  }
  ~TcpRelay() {
    stop_ = true;
    thread_.join();
    for (int fd : {listener_, client_, target_}) {
      if (fd >= 0) ::close(fd);
    }
  }
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  int port() const { return port_; }
  void freeze() { frozen_ = true; }
  // Flips a bit of the byte at offset `at` of what goes `direction`,
  // counted from the connection's first byte that way.
  void flip_byte(Direction direction, long at) { flip_at_[direction] = at; }
  // Everything that went `direction` so far.
  std::string forwarded(Direction direction) {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_[direction];
  }

 private:
  static sockaddr_in loopback(int port) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sa;
  }

  void relay() {
    pollfd accept_poll{listener_, POLLIN, 0};
    while (!stop_ && ::poll(&accept_poll, 1, 50) <= 0) {
    }
    if (stop_) return;
    client_ = ::accept(listener_, nullptr, nullptr);
    target_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa = loopback(target_port_);
    if (::connect(target_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0) return;
    char buf[65536];
    long moved[2] = {0, 0};
    while (!stop_) {
      pollfd fds[2] = {{client_, POLLIN, 0}, {target_, POLLIN, 0}};
      if (frozen_ || ::poll(fds, 2, 50) <= 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        continue;
      }
      for (int d = 0; d < 2; ++d) {
        if (!(fds[d].revents & (POLLIN | POLLHUP))) continue;
        const ssize_t n = ::recv(fds[d].fd, buf, sizeof(buf), 0);
        if (n <= 0) return;
        const long at = flip_at_[d].load();
        if (at >= moved[d] && at < moved[d] + n) buf[at - moved[d]] ^= 0x01;
        moved[d] += n;
        {
          std::lock_guard<std::mutex> lock(mu_);
          seen_[d].append(buf, static_cast<size_t>(n));
        }
        ::send(d == kToTarget ? target_ : client_, buf, static_cast<size_t>(n), MSG_NOSIGNAL);
      }
    }
  }

  const int target_port_;
  int listener_ = -1, client_ = -1, target_ = -1;
  int port_ = 0;
  std::atomic<bool> frozen_{false}, stop_{false};
  std::atomic<long> flip_at_[2] = {{-1}, {-1}};
  std::mutex mu_;
  std::string seen_[2];
  std::thread thread_;
};

}  // namespace kolo
