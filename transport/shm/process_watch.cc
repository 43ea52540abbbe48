#include "transport/shm/process_watch.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

#include "common/log.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

namespace kolo {

ProcessWatch::ProcessWatch(int pid) {
  fd_ = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd_ >= 0) return;
  const int err = errno;
  if (err == ESRCH) {
    ended_at_start_ = true;
    return;
  }
  static std::once_flag told;
  std::call_once(told, [&] {
    KOLO_WARN("pidfd_open failed (" << std::strerror(err) << "): a rank of this host killed outright is noticed "
              "only at KOLO_TIMEOUT_S over shared memory");
  });
}

ProcessWatch::~ProcessWatch() {
  if (fd_ >= 0) ::close(fd_);
}

ProcessWatch::ProcessWatch(ProcessWatch&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)), ended_at_start_(other.ended_at_start_) {}

ProcessWatch& ProcessWatch::operator=(ProcessWatch&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    ended_at_start_ = other.ended_at_start_;
  }
  return *this;
}

bool ProcessWatch::ended() const {
  if (ended_at_start_) return true;
  if (fd_ < 0) return false;
  pollfd fd{fd_, POLLIN, 0};
  return ::poll(&fd, 1, 0) > 0;
}

}  // namespace kolo
