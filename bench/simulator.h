// A simulator of kolo's own allreduce, for scales no machine here has:
// one fiber per rank runs the very code a communicator runs (the
// algorithm tables of collectives/algorithms.h and the schedules behind
// them: ring, recursive doubling, the latency tree, hierarchical), over a
// transport and a memory that move no bytes but keep time. Every message
// crosses a modelled network: hosts x ranks per host, one (latency,
// bandwidth) pair for links within a host (each rank's own port in and
// out) and one for each host's network link (shared by its ranks, in and
// out), plus the speed of reductions and copies. Time is virtual: the
// simulator runs one rank at a time on one thread, in the order of a
// discrete-event queue, so a 1024-rank allreduce needs no 1024 cores and
// gives the same answer every run.
#pragma once

#include <cstddef>
#include <string>

#include "collectives/cost_model.h"
#include "common/status.h"

namespace kolo::bench {

struct SimulatedNetwork {
  int hosts = 1;
  int ranks_per_host = 1;
  LinkCost local = {2.5e-6, 12e9};
  LinkCost remote = {30e-6, 1.25e9};
  double reduce_bytes_per_s = 8e9;  // one rank reducing one input into its own
  double copy_bytes_per_s = 16e9;   // one rank's local copies
  size_t segment_bytes = 2 << 20;   // KOLO_SEGMENT_BYTES
  size_t cache_bytes = 1 << 20;     // half of a core's L2 (pipeline_cache_bytes)
  size_t small_bytes = 64 << 10;    // KOLO_SMALL_ALLREDUCE_BYTES
  int ranks() const { return hosts * ranks_per_host; }
};

struct SimulatedRun {
  std::string algorithm;  // what ran: "auto" resolves to the cost model's choice
  double seconds = 0;     // until the last rank returned
  double estimated = 0;   // the cost model's estimate of the same call (collectives/cost_model.h)
  size_t messages = 0;
};

// One float32 sum allreduce of `bytes` on every rank, by `algorithm`
// ("auto", or an entry's name as KOLO_ALGORITHM takes it, where it
// applies). Fails (INTERNAL) if the schedule would hang or its messages
// would not match, which a real run would report as TIMEOUT or MISMATCH.
Status simulate_allreduce(const SimulatedNetwork& network, const std::string& algorithm, size_t bytes,
                          SimulatedRun* out);

}  // namespace kolo::bench
