// Who this process is in the job, from the launcher's environment. kolo's
// own variables come first; where they are absent, torchrun's, Open MPI's
// and Slurm's are accepted, so a job starts under any of them without MPI.
// Where the launcher names no master:
//   torchrun  MASTER_ADDR/MASTER_PORT, where its agent already serves a c10d
//             TCPStore (TORCHELASTIC_USE_AGENT_STORE): kolo joins it.
//   srun      the first host of SLURM_STEP_NODELIST (127.0.0.1 when the
//             step has one node), a port derived from SLURM_JOB_ID and
//             SLURM_STEP_ID.
//   mpirun    127.0.0.1 and a port derived from the job id when every rank
//             is on this host (OMPI_COMM_WORLD_SIZE == _LOCAL_SIZE); across
//             hosts, `-x KOLO_MASTER_ADDR=... -x KOLO_MASTER_PORT=...`.
#pragma once

#include <string>

#include "common/status.h"

namespace kolo {

struct LaunchInfo {
  int rank = -1;
  int world_size = -1;
  int local_rank = -1;  // -1: not given, derived from host identity at rendezvous
  int local_size = -1;
  std::string master_addr;
  int master_port = -1;
  std::string source;  // which launcher's variables were used, for logs
  // torchrun's agent serves a c10d TCPStore at master_addr:master_port: join
  // it as a client, with every key under torch_store_prefix.
  bool torch_agent_store = false;
  std::string torch_store_prefix;
};

// Reads the variables; errors name the variable that is missing or malformed.
Status read_launch_env(LaunchInfo* info);

}  // namespace kolo
