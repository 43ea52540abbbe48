#include "common/log.h"

#include <atomic>
#include <cstdio>
#include <cctype>
#include <cstring>
#include <mutex>
#include <string>

#include "common/env.h"

namespace kolo {
namespace {

// KOLO_LOG_LEVEL's value, or kWarn where it is unset or malformed (the
// malformed case is reported by load_log_settings, which the configuration
// calls; a log line cannot fail).
LogLevel level_from_env() {
  LogLevel level = LogLevel::kWarn;
  (void)env_log_level(&level);
  return level;
}

// The log's state is never destroyed (each `new` below is kept for good):
// threads may log while the process exits and static destructors run.
std::atomic<int>& level_storage() {
  static std::atomic<int>* level = new std::atomic<int>(static_cast<int>(level_from_env()));
  return *level;
}

std::mutex& prefix_mutex() {
  static std::mutex* m = new std::mutex();
  return *m;
}
std::string& prefix_storage() {
  static std::string* prefix = new std::string();
  return *prefix;
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
  static std::mutex* m = new std::mutex();
  return *m;
}
// Empty: all. Read from the environment on first use.
std::string& subsystems_storage() {
  static std::string* list = new std::string(env_string("KOLO_LOG_SUBSYSTEMS").value_or(""));
  return *list;
}

}  // namespace

Status parse_log_level(const std::string& text, LogLevel* out) {
  static const struct {
    const char* name;
    const char* number;
    LogLevel level;
  } kLevels[] = {{"error", "0", LogLevel::kError},
                 {"warn", "1", LogLevel::kWarn},
                 {"info", "2", LogLevel::kInfo},
                 {"debug", "3", LogLevel::kDebug}};
  std::string lower = text;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& l : kLevels) {
    if (lower == l.name || lower == l.number) {
      *out = l.level;
      return Status::ok();
    }
  }
  return invalid_argument("'" + text + "' is not a log level: use error, warn, info or debug (or 0-3)");
}

Status env_log_level(LogLevel* out) {
  const auto text = env_string("KOLO_LOG_LEVEL");
  if (!text) return Status::ok();
  Status s = parse_log_level(*text, out);
  return s.is_ok() ? s : invalid_argument("KOLO_LOG_LEVEL=" + s.message());
}

Status load_log_settings() {
  LogLevel level = log_level();
  KOLO_RETURN_IF_ERROR(env_log_level(&level));
  set_log_level(level);
  set_log_subsystems(env_string("KOLO_LOG_SUBSYSTEMS").value_or(""));
  return Status::ok();
}

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
