// Whether another process of this host has ended, through a pidfd (Linux
// 5.3+): how the shared-memory transport and arena notice a peer killed
// outright, which never closes its end. A process that had already ended
// when the watch began counts as ended from the start: a peer may do its
// whole part and exit before this rank looks, which is news for the waits
// that need it, not a failure to connect.
#pragma once

namespace kolo {

class ProcessWatch {
 public:
  ProcessWatch() = default;  // watches nothing: never ended
  // Where the kernel has no pidfd, nothing is ever seen (the caller's
  // deadline notices instead), which is warned of once per process.
  explicit ProcessWatch(int pid);
  ~ProcessWatch();
  ProcessWatch(ProcessWatch&& other) noexcept;
  ProcessWatch& operator=(ProcessWatch&& other) noexcept;
  ProcessWatch(const ProcessWatch&) = delete;
  ProcessWatch& operator=(const ProcessWatch&) = delete;

  // Any thread; never blocks.
  bool ended() const;

 private:
  int fd_ = -1;
  bool ended_at_start_ = false;
};

}  // namespace kolo
