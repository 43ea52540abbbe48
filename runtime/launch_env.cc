#include "runtime/launch_env.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "common/env.h"

namespace kolo {
namespace {

// The first variable of `names` that is set, parsed as an integer.
// Returns false when none is set.
Status first_int(const std::vector<const char*>& names, int* out, const char** used, bool* found) {
  *found = false;
  for (const char* name : names) {
    auto v = env_string(name);
    if (!v) continue;
    errno = 0;
    char* end = nullptr;
    long parsed = std::strtol(v->c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || parsed < 0 || parsed > 1 << 24) {
      return invalid_argument(std::string(name) + "='" + *v + "' is not a valid non-negative integer");
    }
    *out = static_cast<int>(parsed);
    *used = name;
    *found = true;
    return Status::ok();
  }
  return Status::ok();
}

}  // namespace

Status read_launch_env(LaunchInfo* info) {
  LaunchInfo li;
  const char* used = nullptr;
  bool found = false;

  KOLO_RETURN_IF_ERROR(first_int({"KOLO_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"},
                                 &li.rank, &used, &found));
  if (!found) {
    return invalid_usage(
        "rank unknown: set KOLO_RANK (or RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID), e.g. by starting the "
        "program with kolorun");
  }
  li.source = used;
  KOLO_RETURN_IF_ERROR(first_int(
      {"KOLO_WORLD_SIZE", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}, &li.world_size, &used,
      &found));
  if (!found) return invalid_usage("world size unknown: set KOLO_WORLD_SIZE (or WORLD_SIZE, OMPI_COMM_WORLD_SIZE, SLURM_NTASKS)");
  if (li.world_size < 1) return invalid_argument(std::string(used) + " must be at least 1");
  if (li.rank >= li.world_size) {
    return invalid_argument("rank " + std::to_string(li.rank) + " is not below world size " +
                            std::to_string(li.world_size));
  }
  KOLO_RETURN_IF_ERROR(first_int({"KOLO_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"},
                                 &li.local_rank, &used, &found));
  if (!found) li.local_rank = -1;
  KOLO_RETURN_IF_ERROR(first_int({"KOLO_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                                 &li.local_size, &used, &found));
  if (!found) li.local_size = -1;

  // The master: kolo's, torchrun's, else Slurm's first node is not knowable
  // without scontrol, so ask for it.
  auto addr = env_string("KOLO_MASTER_ADDR");
  if (!addr) addr = env_string("MASTER_ADDR");
  if (!addr) {
    if (li.world_size == 1) addr = std::string("127.0.0.1");
    else return invalid_usage("master address unknown: set KOLO_MASTER_ADDR (or MASTER_ADDR) to rank 0's host");
  }
  li.master_addr = *addr;
  KOLO_RETURN_IF_ERROR(first_int({"KOLO_MASTER_PORT", "MASTER_PORT"}, &li.master_port, &used, &found));
  if (!found) {
    if (li.world_size == 1) li.master_port = 0;
    else return invalid_usage("master port unknown: set KOLO_MASTER_PORT (or MASTER_PORT)");
  }
  if (li.master_port > 65535) return invalid_argument(std::string(used) + " is not a TCP port");
  *info = li;
  return Status::ok();
}

}  // namespace kolo
