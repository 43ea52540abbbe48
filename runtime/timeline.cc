#include "runtime/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/json_string.h"

namespace kolo {

Timeline::~Timeline() { stop(); }

Status Timeline::start(const std::string& path, int rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_) return invalid_usage("the timeline is already being written");
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) return errno_error(Code::kInvalidArgument, "cannot open timeline file '" + path + "'", errno);
  rank_ = rank;
  first_event_ = true;
  lanes_.clear();
  origin_ = Clock::now();
  std::fputs("{\"traceEvents\": [\n", file_);
  write_locked("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + std::to_string(rank) +
               ", \"args\": {\"name\": \"kolo rank " + std::to_string(rank) + "\"}}");
  active_.store(true);
  return Status::ok();
}

void Timeline::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return;
  active_.store(false);
  std::fputs("\n]}\n", file_);
  std::fclose(file_);
  file_ = nullptr;
}

double Timeline::micros(Clock::time_point t) const {
  return std::chrono::duration<double, std::micro>(t - origin_).count();
}

void Timeline::write_locked(const std::string& event) {
  if (!first_event_) std::fputs(",\n", file_);
  first_event_ = false;
  std::fputs(event.c_str(), file_);
}

int Timeline::lane_locked(const std::string& tensor) {
  auto it = lanes_.find(tensor);
  if (it != lanes_.end()) return it->second;
  const int lane = static_cast<int>(lanes_.size()) + 1;
  lanes_.emplace(tensor, lane);
  write_locked("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + std::to_string(rank_) +
               ", \"tid\": " + std::to_string(lane) + ", \"args\": {\"name\": " + json_string(tensor) + "}}");
  return lane;
}

void Timeline::phase(const std::string& tensor, const char* name, Clock::time_point begin, Clock::time_point end) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return;
  const int lane = lane_locked(tensor);
  char buf[160];
  std::snprintf(buf, sizeof(buf), "\"ts\": %.3f, \"dur\": %.3f, \"pid\": %d, \"tid\": %d}", micros(begin),
                std::max(0.0, micros(end) - micros(begin)), rank_, lane);
  write_locked("{\"name\": " + json_string(name) + ", \"ph\": \"X\", " + buf);
}

void Timeline::instant(const std::string& tensor, const char* name, Clock::time_point at) {
  if (!active()) return;
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return;
  const int lane = lane_locked(tensor);
  char buf[128];
  std::snprintf(buf, sizeof(buf), "\"ts\": %.3f, \"pid\": %d, \"tid\": %d, \"s\": \"t\"}", micros(at), rank_, lane);
  write_locked("{\"name\": " + json_string(name) + ", \"ph\": \"i\", " + buf);
}

}  // namespace kolo
