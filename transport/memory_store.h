// An in-process Store for tests that run several ranks as threads.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "transport/store.h"

namespace kolo {

class MemoryStore : public Store {
 public:
  Status set(const std::string& key, const std::string& value) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      map_[key] = value;
    }
    cv_.notify_all();
    return Status::ok();
  }

  Status set_if_absent(const std::string& key, const std::string& value, Deadline,
                       std::string* current) override {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = map_.emplace(key, value).first;
      *current = it->second;
    }
    cv_.notify_all();
    return Status::ok();
  }

  Status get(const std::vector<std::string>& keys, Deadline deadline, std::vector<std::string>* values) override {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      std::string missing;
      for (const auto& k : keys) {
        if (!map_.count(k)) missing += (missing.empty() ? "" : ", ") + k;
      }
      if (missing.empty()) break;
      if (cv_.wait_until(lock, deadline.time_point()) == std::cv_status::timeout && deadline.expired()) {
        return timeout_error("store keys never set: " + missing);
      }
    }
    values->clear();
    for (const auto& k : keys) values->push_back(map_[k]);
    return Status::ok();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::map<std::string, std::string> map_;
};

}  // namespace kolo
