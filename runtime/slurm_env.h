// Slurm's compact notations, parsed without Slurm's libraries, so a job
// started by srun needs no configuration: the master is the first host of
// the step's node list and the port is derived from the job and step ids.
//   hostlist:        "node[01-04,07]", "a1,b[2-3]", "rack[1-2]-node[01-02]"
//   tasks per node:  "2(x3),1"  (2 tasks on each of 3 nodes, then 1)
// Pure functions: no environment, no I/O (unit-tested and fuzzed).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/status.h"

namespace kolo {

// Expands a hostlist in Slurm's order (brackets left to right, the last
// varying fastest; numbers keep the zero padding of the range's low end).
// Refuses lists of more than `limit` hosts rather than allocating them.
Status expand_hostlist(const std::string& text, size_t limit, std::vector<std::string>* hosts);

// The first host of a hostlist, without expanding the rest.
Status first_host(const std::string& text, std::string* host);

// Expands "2(x3),1" into {2, 2, 2, 1}; at most `limit` entries.
Status expand_tasks_per_node(const std::string& text, size_t limit, std::vector<int>* counts);

// The store's port for a job step: 20000 + hash(job, step) % 12000, in the
// unprivileged range and below Linux's ephemeral ports (32768+), so that no
// outgoing connection on the machine can hold it (one did, in CI).
int slurm_port(const std::string& job_id, const std::string& step_id);

}  // namespace kolo
