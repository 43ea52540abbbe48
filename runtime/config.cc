#include "runtime/config.h"

#include <iomanip>
#include <iterator>
#include <sstream>

#include "collectives/algorithms.h"
#include "collectives/cost_model.h"
#include "collectives/wire_format.h"
#include "common/env.h"
#include "common/log.h"
#include "transport/kind.h"
#include "transport/socket/address.h"

namespace kolo {

Status check_limit(const std::string& name, double value, Limit limit) {
  auto text = [](double v) {
    std::ostringstream o;
    o << std::setprecision(15) << v;
    return o.str();
  };
  if (limit.zero_is_automatic && value == 0) return Status::ok();
  if (!(value >= limit.min)) {
    return invalid_argument(name + " = " + text(value) + ": must be " + (limit.zero_is_automatic ? "0 (automatic) or " : "") +
                            "at least " + text(limit.min));
  }
  if (!(value <= limit.max)) return invalid_argument(name + " = " + text(value) + ": must be at most " + text(limit.max));
  return Status::ok();
}

Status check_transport(const std::string& name, const std::string& value) {
  // Any transport of the registry, by name.
  std::vector<std::string> kinds;
  for (const TransportKind* kind : transport_kinds()) {
    if (kind->carries() == TransportKind::Carries::kHostMemory) kinds.push_back(kind->name());
  }
  std::string names = "auto";
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (value == kinds[k]) return Status::ok();
    names += (k + 1 < kinds.size() ? ", " : " or ") + kinds[k];
  }
  if (value == "auto") return Status::ok();
  return invalid_argument(name + "='" + value + "': use " + names);
}

Status check_algorithm(const std::string& name, const std::string& value) {
  // Any algorithm of the tables (collectives/algorithms.h), by name.
  const std::vector<std::string> known = algorithm_names();
  std::string names = "auto";
  for (size_t k = 0; k < known.size(); ++k) {
    if (value == known[k]) return Status::ok();
    names += (k + 1 < known.size() ? ", " : " or ") + known[k];
  }
  if (value == "auto") return Status::ok();
  return invalid_argument(name + "='" + value + "': use " + names);
}

Status check_link_costs(const std::string& name, const std::string& value) {
  CostModel scratch;
  Status s = parse_link_costs(value, &scratch);
  if (s.is_ok()) return s;
  // parse_link_costs names the variable; a config field has its own name.
  std::string message = s.message();
  const std::string variable = "KOLO_LINK_COSTS";
  if (name != variable && message.rfind(variable, 0) == 0) message = name + message.substr(variable.size());
  return invalid_argument(message);
}

Status check_wire_format(const std::string& name, const std::string& value) {
  WireFormat format;
  if (parse_wire_format(value, &format)) return Status::ok();
  return invalid_argument(name + "='" + value + "': use native, bf16, fp16, fp8_e4m3, fp8_e5m2 or int8");
}

Status check_text(SettingKind kind, const std::string& name, const std::string& value) {
  switch (kind) {
    case SettingKind::kTransport:
      return check_transport(name, value);
    case SettingKind::kAlgorithm:
      return check_algorithm(name, value);
    case SettingKind::kLinkCosts:
      return check_link_costs(name, value);
    case SettingKind::kWireFormat:
      return check_wire_format(name, value);
    default:
      return Status::ok();
  }
}

namespace {

// One variable over one field, by the field's type; unset leaves it.
Status overlay(const char* variable, SettingKind, Limit limit, int64_t* value) {
  if (!limit.zero_is_automatic) return env_int64(variable, *value, int64_t(limit.min), int64_t(limit.max), value);
  KOLO_RETURN_IF_ERROR(env_int64(variable, *value, 0, int64_t(limit.max), value));
  return check_limit(variable, static_cast<double>(*value), limit);
}
Status overlay(const char* variable, SettingKind, Limit limit, double* value) {
  return env_double(variable, *value, limit.min, limit.max, value);
}
Status overlay(const char* variable, SettingKind, Limit, bool* value) { return env_bool(variable, *value, value); }
Status overlay(const char* variable, SettingKind kind, Limit, std::string* value) {
  auto text = env_string(variable);
  if (!text) return Status::ok();
  KOLO_RETURN_IF_ERROR(check_text(kind, variable, *text));
  *value = *text;
  return Status::ok();
}

#define KOLO_SETTING_INFO(field, kind, variable, value, min, max, shown, meaning) \
  {#field, SettingKind::k##kind, variable, limits::field, shown, meaning},
const SettingInfo kSettings[] = {KOLO_SETTINGS(KOLO_SETTING_INFO)};
#undef KOLO_SETTING_INFO

}  // namespace

const SettingInfo* settings_begin() { return std::begin(kSettings); }
const SettingInfo* settings_end() { return std::end(kSettings); }

namespace {

std::string value_text(int64_t v) { return std::to_string(v); }
std::string value_text(double v) {
  std::ostringstream o;
  o << std::setprecision(17) << v;
  return o.str();
}
std::string value_text(bool v) { return v ? "1" : "0"; }
std::string value_text(const std::string& v) { return v; }

}  // namespace

SettingValues setting_values(const Config& c) {
  SettingValues values;
#define KOLO_SETTING_VALUE(field, kind, variable, value, min, max, shown, meaning) \
  values.set(variable, value_text(c.field));
  KOLO_SETTINGS(KOLO_SETTING_VALUE)
#undef KOLO_SETTING_VALUE
  return values;
}

Status overlay_environment(Config* c) {
  KOLO_RETURN_IF_ERROR(load_log_settings());
#define KOLO_OVERLAY(field, kind, variable, value, min, max, shown, meaning) \
  KOLO_RETURN_IF_ERROR(overlay(variable, SettingKind::k##kind, limits::field, &c->field));
  KOLO_SETTINGS(KOLO_OVERLAY)
#undef KOLO_OVERLAY
  return Status::ok();
}

Status resolve_config(Config* c) {
  if (c->bind_address.empty() && !c->interface_name.empty()) {
    KOLO_RETURN_IF_ERROR(interface_address(c->interface_name, &c->bind_address));
  }
  return Status::ok();
}

Status load_config(Config* c) {
  KOLO_RETURN_IF_ERROR(overlay_environment(c));
  return resolve_config(c);
}

}  // namespace kolo
