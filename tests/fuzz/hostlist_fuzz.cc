// Fuzzes Slurm's hostlist and tasks-per-node parsers: whatever a job's
// environment holds must parse or be refused, never crash or expand without
// bound.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/slurm_env.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> hosts;
  kolo::Status s = kolo::expand_hostlist(text, 4096, &hosts);
  std::string first;
  kolo::Status f = kolo::first_host(text, &first);
  if (s.is_ok() != f.is_ok() && s.is_ok()) __builtin_trap();  // what expands has a first host
  if (s.is_ok() && (hosts.empty() || hosts.size() > 4096 || hosts[0] != first)) __builtin_trap();
  std::vector<int> counts;
  if (kolo::expand_tasks_per_node(text, 4096, &counts).is_ok() && (counts.empty() || counts.size() > 4096)) {
    __builtin_trap();
  }
  return 0;
}
