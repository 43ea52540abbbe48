// kolo_config_t, kolo_get_unique_id and kolo_comm_init_rank (NCCL's
// ncclConfig_t, ncclGetUniqueId and ncclCommInitRank): wrappers of the
// settings table (runtime/config.h) and the unique id (runtime/unique_id.h).
#include <algorithm>
#include <cstddef>
#include <iomanip>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "bindings/c/api_support.h"
#include "bindings/c/config_from_c.h"
#include "bindings/c/kolo.h"
#include "common/log.h"
#include "runtime/communicator.h"
#include "runtime/config.h"
#include "runtime/launch_env.h"
#include "runtime/unique_id.h"

using kolo_c::guarded;

static_assert(kolo::kUniqueIdBytes == KOLO_UNIQUE_ID_BYTES, "kolo.h's id holds the runtime's");

namespace {

bool is_set(int64_t v) { return v != KOLO_CONFIG_UNSET_INT; }
bool is_set(double v) { return v != KOLO_CONFIG_UNSET_DOUBLE; }

// One kolo_config_t field over one Config member, by their types; an unset
// field leaves the member. Numbers (int64_t or double; a Bool setting is an
// int64_t limited to 0 and 1) are checked against the setting's limits.
template <typename Number, typename Member>
kolo::Status apply(const std::string& name, kolo::SettingKind, kolo::Limit limit, Number v, Member* out) {
  if (!is_set(v)) return kolo::Status::ok();
  KOLO_RETURN_IF_ERROR(kolo::check_limit(name, static_cast<double>(v), limit));
  *out = static_cast<Member>(v);
  return kolo::Status::ok();
}
kolo::Status apply(const std::string& name, kolo::SettingKind kind, kolo::Limit, const char* v, std::string* out) {
  if (!v) return kolo::Status::ok();
  KOLO_RETURN_IF_ERROR(kolo::check_text(kind, name, v));
  *out = v;
  return kolo::Status::ok();
}

// The bytes of kolo_config_t each KOLO_CONFIG_VERSION holds.
size_t size_of_version(unsigned version) {
  return version == 1   ? offsetof(kolo_config_t, algorithm)
         : version == 2 ? offsetof(kolo_config_t, flight_recorder_entries)
         : version == 3 ? offsetof(kolo_config_t, link_costs)
         : version == 4 ? offsetof(kolo_config_t, wire_format)
                        : sizeof(kolo_config_t);
}

// *given checked for its size and version, with the fields beyond what the
// caller's version holds unset.
kolo::Status read_fields(const std::string& prefix, const kolo_config_t* given, kolo_config_t* fields) {
  if (given->version < 1 || given->version > KOLO_CONFIG_VERSION) {
    return kolo::invalid_argument(prefix + "version = " + std::to_string(given->version) + ": this library knows 1 to " +
                                  std::to_string(KOLO_CONFIG_VERSION) + " (start from KOLO_CONFIG_INITIALIZER)");
  }
  const size_t needed = size_of_version(given->version);
  if (given->size < needed) {
    return kolo::invalid_argument(prefix + "size = " + std::to_string(given->size) + ": version " +
                                  std::to_string(given->version) + " needs at least " + std::to_string(needed) +
                                  " (start from KOLO_CONFIG_INITIALIZER)");
  }
  *fields = KOLO_CONFIG_INITIALIZER;
  std::memcpy(fields, given, std::min(needed, sizeof(*fields)));
  return kolo::Status::ok();
}

// Every field of `f` that is set, over *c; errors name prefix + field.
kolo::Status apply_fields(const std::string& prefix, const kolo_config_t& f, kolo::Config* c) {
#define KOLO_APPLY(field, kind, variable, value, min, max, shown, meaning) \
  KOLO_RETURN_IF_ERROR(apply(prefix + #field, kolo::SettingKind::k##kind, kolo::limits::field, f.field, &c->field));
  KOLO_SETTINGS(KOLO_APPLY)
#undef KOLO_APPLY
  return kolo::Status::ok();
}

// The C type of a setting's kolo_config_t field, as kolo_config_describe
// names it; nullptr for text (a const char*, which has no limits).
const char* number_type(kolo::SettingKind kind) {
  switch (kind) {
    case kolo::SettingKind::kInt:
    case kolo::SettingKind::kBool:
      return "int64";
    case kolo::SettingKind::kDouble:
      return "double";
    default:
      return nullptr;
  }
}

std::string describe_config() {
  // (offset, line) of every field after size and version, put in the
  // struct's order: the settings' rows, and the defaults pointer.
  std::vector<std::pair<size_t, std::string>> lines;
  const size_t offsets[] = {
#define KOLO_OFFSET(field, kind, variable, value, min, max, shown, meaning) offsetof(kolo_config_t, field),
      KOLO_SETTINGS(KOLO_OFFSET)
#undef KOLO_OFFSET
  };
  const size_t* offset = offsets;
  for (const kolo::SettingInfo* s = kolo::settings_begin(); s != kolo::settings_end(); ++s, ++offset) {
    std::ostringstream line;
    const char* number = number_type(s->kind);
    line << s->field << "\t" << (number ? number : "string") << "\t" << *offset << "\t" << s->variable << "\t"
         << s->shown_default << "\t";
    if (number) line << std::setprecision(17) << s->limit.min << "\t" << s->limit.max;
    else line << "\t";
    line << "\t" << s->meaning << "\n";
    lines.emplace_back(*offset, line.str());
  }
  std::ostringstream defaults;
  defaults << "defaults\tconfig\t" << offsetof(kolo_config_t, defaults)
           << "\t\t\t\t\tvalues under the environment's (see kolo.h)\n";
  lines.emplace_back(offsetof(kolo_config_t, defaults), defaults.str());
  std::sort(lines.begin(), lines.end());
  std::string out = "kolo_config_t\t" + std::to_string(KOLO_CONFIG_VERSION) + "\t" +
                    std::to_string(sizeof(kolo_config_t)) + "\n";
  for (const auto& l : lines) out += l.second;
  return out;
}

}  // namespace

namespace kolo_c {

kolo::Status config_from_c(const kolo_config_t* given, kolo::Config* c) {
  if (given) {
    kolo_config_t fields;
    KOLO_RETURN_IF_ERROR(read_fields("config.", given, &fields));
    if (fields.defaults) {
      kolo_config_t defaults;
      KOLO_RETURN_IF_ERROR(read_fields("config.defaults.", fields.defaults, &defaults));
      KOLO_RETURN_IF_ERROR(apply_fields("config.defaults.", defaults, c));
    }
    KOLO_RETURN_IF_ERROR(kolo::overlay_environment(c));
    KOLO_RETURN_IF_ERROR(apply_fields("config.", fields, c));
  } else {
    KOLO_RETURN_IF_ERROR(kolo::overlay_environment(c));
  }
  return kolo::resolve_config(c);
}

}  // namespace kolo_c

extern "C" {

kolo_result_t kolo_get_unique_id(kolo_unique_id_t* id) {
  return guarded([&] {
    if (!id) return kolo::invalid_argument("id output pointer is NULL");
    std::memset(id, 0, sizeof(*id));
    kolo::Config c;
    KOLO_RETURN_IF_ERROR(kolo::load_config(&c));
    return kolo::make_unique_id(c, id->internal);
  });
}

kolo_result_t kolo_comm_init_rank(kolo_comm_t* comm, int nranks, const kolo_unique_id_t* id, int rank,
                                  const kolo_config_t* config) {
  return guarded([&] {
    if (!comm) return kolo::invalid_argument("comm output pointer is NULL");
    *comm = nullptr;
    if (!id) return kolo::invalid_argument("id is NULL");
    if (nranks < 1) return kolo::invalid_argument("nranks must be at least 1");
    if (rank < 0 || rank >= nranks) {
      return kolo::invalid_argument("rank " + std::to_string(rank) + " is not in [0, " + std::to_string(nranks) + ")");
    }
    if (config && config->version >= 1 && config->size >= size_of_version(1)) {
      if (config->secret) return kolo::invalid_argument("config.secret is set: the unique id carries the job's secret");
      if (config->job_id) return kolo::invalid_argument("config.job_id is set: the unique id carries the job's id");
    }
    kolo::Config c;
    KOLO_RETURN_IF_ERROR(kolo_c::config_from_c(config, &c));
    std::unique_ptr<kolo::Communicator> made;
    KOLO_RETURN_IF_ERROR(kolo::join_unique_id(id->internal, rank, nranks, c, &made));
    *comm = new kolo_comm(std::move(made));
    return kolo::Status::ok();
  });
}

kolo_result_t kolo_comm_get_unique_id(kolo_comm_t comm, kolo_unique_id_t* id) {
  return guarded([&] {
    if (!comm) return kolo::invalid_argument("comm is NULL");
    if (!id) return kolo::invalid_argument("id output pointer is NULL");
    return kolo::make_grow_id(*comm->impl(), id->internal);
  });
}

kolo_result_t kolo_comm_grow(kolo_comm_t comm, int nranks, const kolo_unique_id_t* id, int rank,
                             const kolo_config_t* config, kolo_comm_t* newcomm) {
  return guarded([&] {
    if (!newcomm) return kolo::invalid_argument("newcomm output pointer is NULL");
    *newcomm = nullptr;
    std::unique_ptr<kolo::Communicator> made;
    if (comm) {
      if (config) return kolo::invalid_argument("config must be NULL on a rank of comm: it keeps comm's settings");
      KOLO_RETURN_IF_ERROR(comm->impl()->grow(nranks, &made));
    } else {
      if (!id) return kolo::invalid_argument("comm and id are both NULL: a joining rank passes the grow's id");
      if (config) {
        if (config->secret) return kolo::invalid_argument("config.secret is set: the id carries the job's secret");
        if (config->job_id) return kolo::invalid_argument("config.job_id is set: the id carries the job's id");
      }
      kolo::Config c;
      KOLO_RETURN_IF_ERROR(kolo_c::config_from_c(config, &c));
      KOLO_RETURN_IF_ERROR(kolo::join_grow_id(id->internal, rank, nranks, c, &made));
    }
    *newcomm = new kolo_comm(std::move(made));
    return kolo::Status::ok();
  });
}

const char* kolo_config_describe(void) {
  try {
    static const std::string text = describe_config();  // built once
    return text.c_str();
  } catch (...) {  // no exception crosses the C API; out of memory: nothing
    return "";
  }
}

kolo_result_t kolo_comm_init_from_env_config(kolo_comm_t* comm, const kolo_config_t* config) {
  return guarded([&] {
    if (!comm) return kolo::invalid_argument("comm output pointer is NULL");
    *comm = nullptr;
    kolo::Config c;
    KOLO_RETURN_IF_ERROR(kolo_c::config_from_c(config, &c));
    kolo::LaunchInfo info;
    KOLO_RETURN_IF_ERROR(kolo::read_launch_env(&info));
    std::unique_ptr<kolo::Communicator> made;
    KOLO_RETURN_IF_ERROR(kolo::Communicator::create(info, c, &made));
    *comm = new kolo_comm(std::move(made));
    return kolo::Status::ok();
  });
}

}  // extern "C"
