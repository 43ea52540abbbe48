#include "runtime/launch_env.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "common/env.h"
#include "runtime/slurm_env.h"

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

// Slurm names no master, but srun starts task 0 on the first node of the
// step, and every task can compute the same port from the job and step ids.
Status slurm_master(LaunchInfo* li) {
  auto nodes = env_string("SLURM_STEP_NODELIST");
  const char* nodes_var = "SLURM_STEP_NODELIST";
  if (!nodes) nodes = env_string(nodes_var = "SLURM_JOB_NODELIST");
  if (!nodes) nodes = env_string(nodes_var = "SLURM_NODELIST");
  if (!nodes) {
    return invalid_usage("master address unknown under Slurm: SLURM_STEP_NODELIST is not set (start the job with "
                         "srun, or set KOLO_MASTER_ADDR)");
  }
  Status s = first_host(*nodes, &li->master_addr);
  if (!s.is_ok()) return invalid_argument(std::string(nodes_var) + ": " + s.message());
  // A step on one node needs no name at all: its node name need not
  // resolve on the node itself (a container, a minimal image), loopback does.
  std::vector<std::string> hosts;
  if (expand_hostlist(*nodes, 2, &hosts).is_ok() && hosts.size() == 1) li->master_addr = "127.0.0.1";
  if (li->master_port < 0) {
    auto job = env_string("SLURM_JOB_ID");
    if (!job) job = env_string("SLURM_JOBID");
    auto step = env_string("SLURM_STEP_ID");
    if (!step) step = env_string("SLURM_STEPID");
    if (!job) return invalid_usage("master port unknown under Slurm: SLURM_JOB_ID is not set (set KOLO_MASTER_PORT)");
    li->master_port = slurm_port(*job, step.value_or("0"));
  }
  return Status::ok();
}

// Slurm gives the tasks on this node as an entry of a per-node list.
Status slurm_local_size(LaunchInfo* li) {
  auto per_node = env_string("SLURM_STEP_TASKS_PER_NODE");
  const char* var = "SLURM_STEP_TASKS_PER_NODE";
  if (!per_node) per_node = env_string(var = "SLURM_TASKS_PER_NODE");
  int node = -1;
  const char* used = nullptr;
  bool found = false;
  KOLO_RETURN_IF_ERROR(first_int({"SLURM_NODEID"}, &node, &used, &found));
  if (per_node && found) {
    std::vector<int> counts;
    Status s = expand_tasks_per_node(*per_node, 1 << 20, &counts);
    if (!s.is_ok()) return invalid_argument(std::string(var) + ": " + s.message());
    if (node < static_cast<int>(counts.size())) li->local_size = counts[node];
    return Status::ok();
  }
  return first_int({"SLURM_NTASKS_PER_NODE"}, &li->local_size, &used, &found);
}

// Open MPI names no master either. When every rank is on this host, the
// master is 127.0.0.1 and the port comes from the job id all ranks share.
Status open_mpi_master(LaunchInfo* li) {
  int local_size = -1;
  const char* used = nullptr;
  bool found = false;
  KOLO_RETURN_IF_ERROR(first_int({"OMPI_COMM_WORLD_LOCAL_SIZE"}, &local_size, &used, &found));
  auto job = env_string("OMPI_MCA_ess_base_jobid");
  if (!job) job = env_string("PMIX_NAMESPACE");
  if (!found || local_size != li->world_size || !job) {
    return invalid_usage(
        "master address unknown under mpirun with ranks on several hosts: pass -x KOLO_MASTER_ADDR=<rank 0's host> "
        "-x KOLO_MASTER_PORT=<free port> to mpirun");
  }
  li->master_addr = "127.0.0.1";
  if (li->master_port < 0) li->master_port = slurm_port("ompi-" + *job, "");
  return Status::ok();
}

// torchrun's agent serves a c10d TCPStore on MASTER_ADDR:MASTER_PORT and says
// so; the workers share it under a prefix naming the run and the attempt.
void torch_agent_store(LaunchInfo* li) {
  auto flag = env_string("TORCHELASTIC_USE_AGENT_STORE");
  if (!flag || env_string("KOLO_MASTER_ADDR")) return;
  if (*flag != "1" && *flag != "true" && *flag != "True" && *flag != "TRUE") return;
  li->torch_agent_store = true;
  li->torch_store_prefix = "/kolo/" + env_string("TORCHELASTIC_RUN_ID").value_or("none") + "/" +
                           env_string("TORCHELASTIC_RESTART_COUNT").value_or("0") + "/";
}

Status read_master(LaunchInfo* li) {
  const char* used = nullptr;
  bool found = false;
  KOLO_RETURN_IF_ERROR(first_int({"KOLO_MASTER_PORT", "MASTER_PORT"}, &li->master_port, &used, &found));
  if (!found) li->master_port = -1;
  if (found && li->master_port > 65535) return invalid_argument(std::string(used) + " is not a TCP port");
  auto addr = env_string("KOLO_MASTER_ADDR");
  if (!addr) addr = env_string("MASTER_ADDR");
  if (addr) {
    li->master_addr = *addr;
    if (li->master_port < 0) {
      if (li->world_size > 1) return invalid_usage("master port unknown: set KOLO_MASTER_PORT (or MASTER_PORT)");
      li->master_port = 0;
    }
    torch_agent_store(li);
    return Status::ok();
  }
  if (li->world_size == 1) {
    li->master_addr = "127.0.0.1";
    if (li->master_port < 0) li->master_port = 0;
    return Status::ok();
  }
  if (li->source == "SLURM_PROCID") {
    KOLO_RETURN_IF_ERROR(slurm_master(li));
  } else if (li->source == "OMPI_COMM_WORLD_RANK") {
    KOLO_RETURN_IF_ERROR(open_mpi_master(li));
  } else {
    return invalid_usage("master address unknown: set KOLO_MASTER_ADDR (or MASTER_ADDR) to rank 0's host");
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
  if (!found && li.source == "SLURM_PROCID") KOLO_RETURN_IF_ERROR(slurm_local_size(&li));

  KOLO_RETURN_IF_ERROR(read_master(&li));
  *info = li;
  return Status::ok();
}

}  // namespace kolo
