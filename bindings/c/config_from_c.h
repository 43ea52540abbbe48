// kolo_config_t to kolo::Config: what kolo_comm_init_rank does with its
// config, exposed for tests.
#pragma once

#include "bindings/c/kolo.h"
#include "common/status.h"
#include "runtime/config.h"

namespace kolo_c {

// The environment's Config (load_config), then every field `given` sets
// (NULL sets none). Bad values, sizes and versions are invalid_argument
// naming the field.
kolo::Status config_from_c(const kolo_config_t* given, kolo::Config* config);

}  // namespace kolo_c
