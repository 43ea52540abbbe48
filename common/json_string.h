// A string as a JSON string literal, quotes included: what kolo's JSON
// writers (the timeline, the flight recorder) put between their fields.
#pragma once

#include <cstdio>
#include <string>

namespace kolo {

inline std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace kolo
