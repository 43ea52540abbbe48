#include "transport/progress_loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace kolo {

ProgressLoop::~ProgressLoop() {
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

Status ProgressLoop::open() {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return errno_error(Code::kInternal, "eventfd", errno);
  return Status::ok();
}

bool ProgressLoop::abort() {
  if (aborted_.exchange(true)) return false;
  wake();
  return true;
}

void ProgressLoop::interrupt() {
  interrupted_.store(true);
  wake();
}

void ProgressLoop::wake() {
  if (wake_fd_ < 0) return;
  uint64_t one = 1;
  ssize_t ignored = ::write(wake_fd_, &one, sizeof(one));
  (void)ignored;
}

void ProgressLoop::consume_wake() {
  // After an abort the eventfd stays readable on purpose (every later poll
  // returns at once); only an interrupt's count is consumed.
  if (aborted_.load()) return;
  uint64_t count;
  ssize_t ignored = ::read(wake_fd_, &count, sizeof(count));
  (void)ignored;
}

Status ProgressLoop::wait(std::vector<pollfd>* fds, int timeout_ms, int* ready) {
  fds->push_back({wake_fd_, POLLIN, 0});
  const int n = ::poll(fds->data(), fds->size(), timeout_ms);
  const int error = errno;
  const bool woken = n > 0 && (fds->back().revents & POLLIN);
  fds->pop_back();
  *ready = n > 0 ? n : 0;
  if (n < 0 && error != EINTR) return errno_error(Code::kTransport, "poll", error);
  // An interrupt's count must be consumed, or every later poll returns at
  // once and the caller spins; its flag was set before the count, so the
  // next look in run() still sees it.
  if (woken) consume_wake();
  return Status::ok();
}

}  // namespace kolo
