// The size of the cache a core has to itself, as Linux describes cpu0's
// (/sys/devices/system/cpu/cpu0/cache): what the pipeline's segment is
// sized by, and past which the arena measures whether to write results
// around the cache. The last level is not read: what a core gets of it is
// no figure the machine reports (a VM's sysfs gives its host's whole L3,
// 480 MiB on an Intel VM, shared with every tenant; sysconf gave 384 MiB on
// the EPYC VMs, where a core shared 32 MiB).
#pragma once

#include <cstddef>

namespace kolo {

struct CpuCaches {
  size_t l2 = 0;  // one core's L2 (0: unknown)
};

// Read once per process.
const CpuCaches& cpu_caches();

}  // namespace kolo
