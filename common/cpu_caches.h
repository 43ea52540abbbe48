// The sizes of the caches a core sees, as Linux describes cpu0's
// (/sys/devices/system/cpu/cpu0/cache): what the pipeline's segment and the
// choice to copy results around the cache are sized by. sysconf is no
// substitute: on some machines it reports the whole socket's L3 (384 MiB on
// the EPYC VMs, where a core shares 32 MiB).
#pragma once

#include <cstddef>

namespace kolo {

struct CpuCaches {
  size_t l2 = 0;          // one core's L2 (0: unknown)
  size_t last_level = 0;  // the largest level a core reaches (0: unknown)
};

// Read once per process.
const CpuCaches& cpu_caches();

}  // namespace kolo
