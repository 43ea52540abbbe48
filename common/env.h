// Typed reads of environment variables. Only runtime/config.cc and the launch
// variable reader call these; everything else receives plain option structs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace kolo {

// nullopt when unset or empty.
std::optional<std::string> env_string(const char* name);

// Parse helpers: a set-but-malformed value is an error naming the variable,
// never silently replaced by the default.
Status env_int64(const char* name, int64_t default_value, int64_t min, int64_t max, int64_t* out);
Status env_double(const char* name, double default_value, double min, double max, double* out);
Status env_bool(const char* name, bool default_value, bool* out);

// Parses sizes such as "4096", "256K", "64M", "1G" (binary units).
Status parse_bytes(const std::string& text, int64_t* out);

}  // namespace kolo
