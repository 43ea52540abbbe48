// Every tunable of a communicator (the rows of settings_table.h), its
// limits, and the environment reader. A malformed value is an error naming
// the variable or field.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/setting_values.h"
#include "common/status.h"
#include "runtime/settings_table.h"

namespace kolo {

class Device;

// The type of each kind of setting (settings_table.h).
#define KOLO_SETTING_TYPE_Int int64_t
#define KOLO_SETTING_TYPE_Double double
#define KOLO_SETTING_TYPE_Bool bool
#define KOLO_SETTING_TYPE_Text std::string
#define KOLO_SETTING_TYPE_Transport std::string
#define KOLO_SETTING_TYPE_Algorithm std::string
#define KOLO_SETTING_TYPE_LinkCosts std::string
#define KOLO_SETTING_TYPE_WireFormat std::string

// Every setting (settings_table.h says what each means), with its default.
struct Config {
#define KOLO_CONFIG_MEMBER(field, kind, variable, value, min, max, shown, meaning) \
  KOLO_SETTING_TYPE_##kind field = value;
  KOLO_SETTINGS(KOLO_CONFIG_MEMBER)
#undef KOLO_CONFIG_MEMBER

  // The GPU to use for device buffers instead of GPU local_rank % count
  // (not a setting: tests pass an emulated one). Not owned.
  Device* device = nullptr;
};

// The accepted range of each numeric setting, shared by the environment
// reader (load_config) and the C API's kolo_config_t, so both refuse the
// same values.
struct Limit {
  double min;
  double max;
  bool zero_is_automatic = false;  // 0 is accepted too, below min: "choose for me"
};
// The settings whose 0 asks kolo to choose (the table's min is then the
// least value a user may choose instead).
constexpr bool zero_is_automatic(std::string_view field) { return field == "segment_bytes"; }
namespace limits {
#define KOLO_SETTING_LIMIT(field, kind, variable, value, min, max, shown, meaning) \
  constexpr Limit field{min, max, zero_is_automatic(#field)};
KOLO_SETTINGS(KOLO_SETTING_LIMIT)
#undef KOLO_SETTING_LIMIT
}  // namespace limits

enum class SettingKind { kInt, kDouble, kBool, kText, kTransport, kAlgorithm, kLinkCosts, kWireFormat };

// One row of the table, for what lists the settings (kolo_config_describe,
// the Configuration docs).
struct SettingInfo {
  const char* field;
  SettingKind kind;
  const char* variable;
  Limit limit;
  const char* shown_default;
  const char* meaning;
};
const SettingInfo* settings_begin();
const SettingInfo* settings_end();

// The checks of a value set in code (name is how the caller knows it, e.g.
// "config.segment_bytes"): out of range is invalid_argument naming it.
Status check_limit(const std::string& name, double value, Limit limit);
Status check_transport(const std::string& name, const std::string& value);
Status check_algorithm(const std::string& name, const std::string& value);
// The check of a Text setting of this kind (Transport, Algorithm; any
// other Text is free).
Status check_text(SettingKind kind, const std::string& name, const std::string& value);

// Every setting's value as text by its variable (KOLO_IB_PORT), for the
// transports, which read their own (transport/kind.h).
SettingValues setting_values(const Config& config);

// Settings come in layers, each replacing what the one before set: the
// defaults above, then (kolo_config_t's `defaults`), the environment, then
// the fields of a kolo_config_t.
//
// Overlays the environment (and the logging settings): a variable that is
// set replaces the field (a malformed one is invalid_argument naming it);
// an unset one leaves it.
Status overlay_environment(Config* config);
// What follows once every layer is applied: the address of interface_name
// when bind_address is empty.
Status resolve_config(Config* config);
// The defaults and the environment, resolved.
Status load_config(Config* config);

}  // namespace kolo
