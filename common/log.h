// Leveled logging to stderr. The level comes from KOLO_LOG_LEVEL (error,
// warn, info, debug; default warn), read at first use and again by
// load_log_settings; a disabled message costs
// one integer comparison and never formats its arguments.
// KOLO_LOG_SUBSYSTEMS (e.g. "runtime,transport") keeps only messages from
// those source directories (common, transport, collectives, runtime,
// bindings, bench); unset keeps all. It is consulted only for messages that
// pass the level.
#pragma once

#include <sstream>
#include <string>

#include "common/status.h"

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

// "error", "warn", "info", "debug" (any case) or 0-3; anything else is an
// error that names the accepted values.
Status parse_log_level(const std::string& text, LogLevel* out);
// KOLO_LOG_LEVEL into *out, untouched where unset; malformed: an error
// naming the variable.
Status env_log_level(LogLevel* out);
// Reads KOLO_LOG_LEVEL and KOLO_LOG_SUBSYSTEMS again and applies them (the
// configuration calls it, so a bad value fails with the variable's name
// instead of being ignored).
Status load_log_settings();

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
