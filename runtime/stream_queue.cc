#include "runtime/stream_queue.h"

#include <chrono>

namespace kolo {

void StreamQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (!thread_.joinable()) return;
  if (std::this_thread::get_id() == thread_.get_id()) {
    thread_.detach();  // the last reference went on the thread itself: it ends once this returns
  } else {
    thread_.join();
  }
}

void StreamQueue::push(std::function<void()> job, std::function<void()> then) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (running_then_ && std::this_thread::get_id() == thread_.get_id()) {
    jobs_.insert(jobs_.begin() + static_cast<std::ptrdiff_t>(pushed_by_then_++),
                 Job{std::move(job), std::move(then)});
  } else {
    jobs_.push_back(Job{std::move(job), std::move(then)});
  }
  unfinished_.fetch_add(1, std::memory_order_relaxed);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  cv_.notify_all();
}

bool StreamQueue::drain(double timeout_s) {
  if (idle()) return true;  // acquire: what the last job did is seen once its count is
  std::unique_lock<std::mutex> lock(mutex_);
  const Deadline deadline = Deadline::after_seconds(timeout_s);
  while (unfinished_.load(std::memory_order_relaxed) > 0) {
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
    run_job(job, lock);
    run_then(job, lock);
    running_then_ = false;
  }
}

void StreamQueue::run_job(Job& job, std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  job.run();
  lock.lock();
  unfinished_.fetch_sub(1, std::memory_order_release);
  cv_.notify_all();
}

void StreamQueue::run_then(Job& job, std::unique_lock<std::mutex>& lock) {
  if (!job.then) return;
  running_then_ = true;
  pushed_by_then_ = 0;
  lock.unlock();
  job.then();
  lock.lock();
}

StreamQueue::Ran StreamQueue::run_next_here() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!thread_.joinable() || std::this_thread::get_id() != thread_.get_id()) return Ran::kNotThisThread;
  if (jobs_.empty()) return Ran::kNothingQueued;
  Job job = std::move(jobs_.front());
  jobs_.pop_front();
  // The waiting `then`'s window, restored afterwards: the job run here was
  // the first it had pushed (if any), and what this job's `then` pushes
  // stays ahead of the rest of them, as it would had it run in the loop.
  const bool outer_then = running_then_;
  const size_t outer_pushed = pushed_by_then_ > 0 ? pushed_by_then_ - 1 : 0;
  run_job(job, lock);
  size_t pushed_here = 0;
  if (job.then) {
    run_then(job, lock);
    pushed_here = pushed_by_then_;
  }
  running_then_ = outer_then;
  pushed_by_then_ = outer_pushed + pushed_here;
  return Ran::kOne;
}

}  // namespace kolo
