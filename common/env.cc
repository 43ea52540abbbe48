#include "common/env.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace kolo {

std::optional<std::string> env_string(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

Status parse_bytes(const std::string& text, int64_t* out) {
  if (text.empty()) return invalid_argument("empty size");
  errno = 0;
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str() || value < 0) return invalid_argument("bad size '" + text + "'");
  int64_t mult = 1;
  std::string suffix(end);
  if (suffix == "" || suffix == "B") mult = 1;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB") mult = int64_t{1} << 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB") mult = int64_t{1} << 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB") mult = int64_t{1} << 30;
  else return invalid_argument("bad size suffix in '" + text + "' (use K, M or G)");
  if (value > INT64_MAX / mult) return invalid_argument("size '" + text + "' overflows");
  *out = value * mult;
  return Status::ok();
}

Status env_int64(const char* name, int64_t default_value, int64_t min, int64_t max, int64_t* out) {
  auto v = env_string(name);
  if (!v) {
    *out = default_value;
    return Status::ok();
  }
  // A setting whose range goes below zero (-1: automatic) takes a sign.
  const bool negative = min < 0 && !v->empty() && (*v)[0] == '-';
  int64_t parsed = 0;
  Status s = parse_bytes(negative ? v->substr(1) : *v, &parsed);
  if (!s.is_ok()) {
    return invalid_argument(std::string(name) + "='" + *v + "' is not " +
                            (min < 0 ? "an integer" : "a non-negative integer"));
  }
  if (negative) parsed = -parsed;
  if (parsed < min || parsed > max) {
    return invalid_argument(std::string(name) + "=" + *v + " is out of range [" + std::to_string(min) + ", " +
                            std::to_string(max) + "]");
  }
  *out = parsed;
  return Status::ok();
}

Status env_double(const char* name, double default_value, double min, double max, double* out) {
  auto v = env_string(name);
  if (!v) {
    *out = default_value;
    return Status::ok();
  }
  errno = 0;
  char* end = nullptr;
  double parsed = std::strtod(v->c_str(), &end);
  if (errno != 0 || end == v->c_str() || *end != '\0' || !std::isfinite(parsed)) {
    return invalid_argument(std::string(name) + "='" + *v + "' is not a number");
  }
  if (parsed < min || parsed > max) {
    return invalid_argument(std::string(name) + "=" + *v + " is out of range [" + std::to_string(min) + ", " +
                            std::to_string(max) + "]");
  }
  *out = parsed;
  return Status::ok();
}

Status env_bool(const char* name, bool default_value, bool* out) {
  auto v = env_string(name);
  if (!v) {
    *out = default_value;
    return Status::ok();
  }
  if (*v == "1" || *v == "true" || *v == "yes" || *v == "on") *out = true;
  else if (*v == "0" || *v == "false" || *v == "no" || *v == "off") *out = false;
  else return invalid_argument(std::string(name) + "='" + *v + "' is not a boolean (use 0 or 1)");
  return Status::ok();
}

}  // namespace kolo
