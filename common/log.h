// Leveled logging to stderr. The level comes from KOLO_LOG_LEVEL (error,
// warn, info, debug; default warn) and is read once; a disabled message costs
// one integer comparison and never formats its arguments.
// KOLO_LOG_SUBSYSTEMS (e.g. "runtime,transport") keeps only messages from
// those source directories (common, transport, collectives, runtime,
// bindings, bench); unset keeps all. It is consulted only for messages that
// pass the level.
#pragma once

#include <sstream>

namespace kolo {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

LogLevel log_level();
void set_log_level(LogLevel level);
// Prefix for every line of this process, e.g. "rank 3"; set once the rank is known.
void set_log_prefix(const std::string& prefix);
void log_line(LogLevel level, const char* file, int line, const std::string& text);
// Comma-separated directory names; "" keeps every subsystem.
void set_log_subsystems(const std::string& list);
bool log_subsystem_enabled(const char* file);

}  // namespace kolo

#define KOLO_LOG(level, stream_expr)                                               \
  do {                                                                             \
    if (static_cast<int>(::kolo::LogLevel::level) <= static_cast<int>(::kolo::log_level()) && \
        ::kolo::log_subsystem_enabled(__FILE__)) {                                  \
      std::ostringstream kolo_log_os_;                                             \
      kolo_log_os_ << stream_expr;                                                 \
      ::kolo::log_line(::kolo::LogLevel::level, __FILE__, __LINE__, kolo_log_os_.str()); \
    }                                                                              \
  } while (0)

#define KOLO_ERROR(x) KOLO_LOG(kError, x)
#define KOLO_WARN(x) KOLO_LOG(kWarn, x)
#define KOLO_INFO(x) KOLO_LOG(kInfo, x)
#define KOLO_DEBUG(x) KOLO_LOG(kDebug, x)
