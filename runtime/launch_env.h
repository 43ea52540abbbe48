// Who this process is in the job, from the launcher's environment. kolo's
// own variables come first; where they are absent, torchrun's, Open MPI's
// and Slurm's are accepted, so a job starts under any of them without MPI.
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
};

// Reads the variables; errors name the variable that is missing or malformed.
Status read_launch_env(LaunchInfo* info);

}  // namespace kolo
