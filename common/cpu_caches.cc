#include "common/cpu_caches.h"

#include <fstream>
#include <string>

namespace kolo {
namespace {

CpuCaches read_cpu_caches() {
  CpuCaches caches;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    std::ifstream level_file(dir + "level"), size_file(dir + "size"), type_file(dir + "type");
    int level = 0;
    size_t size = 0;
    std::string unit, type;
    if (!(level_file >> level) || !(size_file >> size)) continue;
    size_file >> unit;  // "1024K"
    type_file >> type;
    if (type == "Instruction") continue;
    if (!unit.empty() && (unit[0] == 'K' || unit[0] == 'k')) size <<= 10;
    if (!unit.empty() && unit[0] == 'M') size <<= 20;
    if (level == 2) caches.l2 = size;
  }
  return caches;
}

}  // namespace

const CpuCaches& cpu_caches() {
  static const CpuCaches caches = read_cpu_caches();
  return caches;
}

}  // namespace kolo
