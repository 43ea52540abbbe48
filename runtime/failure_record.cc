#include "runtime/failure_record.h"

#include <cctype>
#include <climits>

namespace kolo {
namespace {

// A non-negative decimal that fits an int, the whole of `text`.
bool parse_count(const std::string& text, int* out) {
  if (text.empty() || text.size() > 10) return false;
  long long v = 0;
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + (c - '0');
  }
  if (v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

std::string encode_failure(const FailureRecord& r) {
  return std::to_string(r.rank) + "|" + std::to_string(static_cast<int>(r.code)) + "|" + r.message;
}

Status decode_failure(const std::string& text, FailureRecord* r) {
  const size_t a = text.find('|');
  const size_t b = a == std::string::npos ? a : text.find('|', a + 1);
  int rank = 0, code = 0;
  if (b == std::string::npos || !parse_count(text.substr(0, a), &rank) ||
      !parse_count(text.substr(a + 1, b - a - 1), &code) || code <= 0 || code > static_cast<int>(kLastCode)) {
    return internal_error("malformed failure record '" + text.substr(0, 200) + "' in the store");
  }
  r->rank = rank;
  r->code = static_cast<Code>(code);
  r->message = text.substr(b + 1);
  return Status::ok();
}

}  // namespace kolo
