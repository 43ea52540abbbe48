// kolo_bench simulate: the simulator (simulator.h) as a benchmark, for
// scales no machine here has. One process, no communicator.
//   - the sweep: each algorithm's allreduce time per size over the
//     modelled network, and what "auto" (the cost model) chose, with how
//     far its time is from the best;
//   - with models: the scaling efficiency of data-parallel training
//     (scaling.h's buckets and overlap) per schedule, as the Horovod
//     paper measured it.
#pragma once

#include <string>
#include <vector>

#include "bench/simulator.h"

namespace kolo::bench {

struct SimulateOptions {
  SimulatedNetwork network;
  std::vector<std::string> algorithms = {"ring", "recursive_doubling", "halving_doubling", "tree",
                                         "hierarchical"};
  size_t min_bytes = 8;
  size_t max_bytes = size_t(256) << 20;
  double step_factor = 4;
  // Scaling: the models (none: the sweep only), their fusion buckets and
  // compute (as scaling.h's options).
  std::vector<std::string> models;
  double bucket_mb = 25;
  double compute_scale = 1;
  // The Horovod paper's reported efficiencies, to print beside ours
  // (model name -> percent); empty: no column.
  std::vector<std::pair<std::string, double>> reported;
};

// Prints the tables; false when a simulation failed (said on stderr).
bool run_simulate(const SimulateOptions& o);

}  // namespace kolo::bench
