#include "runtime/stream_queue.h"

#include <chrono>

namespace kolo {

StreamQueue::~StreamQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StreamQueue::push(std::function<void()> job, std::function<void()> then) {
  std::lock_guard<std::mutex> lock(mutex_);
  jobs_.push_back(Job{std::move(job), std::move(then)});
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  cv_.notify_all();
}

bool StreamQueue::drain(Deadline deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!jobs_.empty() || running_job_) {
    if (deadline.expired()) return false;
    cv_.wait_for(lock, std::chrono::milliseconds(10));
  }
  return true;
}

void StreamQueue::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and nothing left
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    running_job_ = true;
    lock.unlock();
    job.run();
    lock.lock();
    running_job_ = false;
    cv_.notify_all();
    if (job.then) {
      lock.unlock();
      job.then();
      lock.lock();
    }
  }
}

}  // namespace kolo
