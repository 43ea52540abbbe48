#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace kolo {
namespace {

LogLevel parse_level(const char* text) {
  if (text == nullptr) return LogLevel::kWarn;
  std::string s(text);
  if (s == "error" || s == "ERROR" || s == "0") return LogLevel::kError;
  if (s == "info" || s == "INFO" || s == "2") return LogLevel::kInfo;
  if (s == "debug" || s == "DEBUG" || s == "3" || s == "trace") return LogLevel::kDebug;
  return LogLevel::kWarn;
}

std::atomic<int>& level_storage() {
  static std::atomic<int> level{static_cast<int>(parse_level(std::getenv("KOLO_LOG_LEVEL")))};
  return level;
}

std::mutex& prefix_mutex() {
  static std::mutex m;
  return m;
}
std::string& prefix_storage() {
  static std::string prefix;
  return prefix;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "ERROR";
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kDebug: return "DEBUG";
  }
  return "?";
}

std::mutex& subsystems_mutex() {
  static std::mutex m;
  return m;
}
// Empty: all. Read from the environment on first use.
std::string& subsystems_storage() {
  static std::string list = [] {
    const char* v = std::getenv("KOLO_LOG_SUBSYSTEMS");
    return v ? std::string(v) : std::string();
  }();
  return list;
}

}  // namespace

void set_log_subsystems(const std::string& list) {
  std::lock_guard<std::mutex> lock(subsystems_mutex());
  subsystems_storage() = list;
}

bool log_subsystem_enabled(const char* file) {
  std::lock_guard<std::mutex> lock(subsystems_mutex());
  const std::string& list = subsystems_storage();
  if (list.empty()) return true;
  // The subsystem is the file's top-level directory ("runtime/engine.cc").
  std::string path(file);
  const auto slash = path.find('/');
  const std::string dir = slash == std::string::npos ? path : path.substr(0, slash);
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    if (list.compare(start, end - start, dir) == 0) return true;
    start = end + 1;
  }
  return false;
}

LogLevel log_level() { return static_cast<LogLevel>(level_storage().load(std::memory_order_relaxed)); }

void set_log_level(LogLevel level) { level_storage().store(static_cast<int>(level)); }

void set_log_prefix(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(prefix_mutex());
  prefix_storage() = prefix;
}

void log_line(LogLevel level, const char* file, int line, const std::string& text) {
  const char* base = std::strrchr(file, '/');
  base = base ? base + 1 : file;
  std::string prefix;
  {
    std::lock_guard<std::mutex> lock(prefix_mutex());
    prefix = prefix_storage();
  }
  // One fprintf per line so lines from several threads do not interleave.
  std::fprintf(stderr, "kolo %s%s%s %s:%d] %s\n", level_name(level), prefix.empty() ? "" : " ",
               prefix.c_str(), base, line, text.c_str());
}

}  // namespace kolo
