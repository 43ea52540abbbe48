// The settings of a communicator as text, by their variable's name
// (KOLO_IB_PORT -> "1"), for the layers below the runtime: a transport reads
// its own settings here without knowing the runtime's Config. The runtime
// fills it from its settings table (runtime/settings_table.h), whose rows
// have already checked every value, and a test checks that each name a
// transport reads is a row of that table.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>

namespace kolo {

class SettingValues {
 public:
  void set(const std::string& variable, const std::string& value) { values_[variable] = value; }
  bool has(const std::string& variable) const { return values_.count(variable) != 0; }
  // A setting not given reads as `fallback` (tests open transports with
  // no settings at all).
  std::string text(const std::string& variable, const std::string& fallback = "") const {
    auto it = values_.find(variable);
    return it == values_.end() ? fallback : it->second;
  }
  int64_t integer(const std::string& variable, int64_t fallback) const {
    auto it = values_.find(variable);
    return it == values_.end() ? fallback : std::strtoll(it->second.c_str(), nullptr, 10);
  }
  double number(const std::string& variable, double fallback) const {
    auto it = values_.find(variable);
    return it == values_.end() ? fallback : std::strtod(it->second.c_str(), nullptr);
  }
  bool flag(const std::string& variable, bool fallback) const { return integer(variable, fallback ? 1 : 0) != 0; }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace kolo
