// How a communicator's collectives are tuned, as pure functions of what
// every rank knows alike (the ranks' facts, the routes they take, the
// settings) and of this machine: so every rank decides the same, and a test
// tries any machine by making up its facts (tuning_test.cc).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "collectives/cost_model.h"
#include "collectives/hierarchical.h"
#include "runtime/config.h"
#include "transport/routes.h"

namespace kolo {

// How a rank waits for bytes, the pipeline's unit and what stays in the
// cache (pipeline.h).
struct Pacing {
  int spin_us = 50;
  bool yield = true;
  size_t segment_bytes = size_t{2} << 20;
  size_t cache_bytes = size_t{1} << 20;
};
// Busy-polling saves the cost of waking a sleeping process (tens of
// microseconds in a VM) but steals the core from other ranks when they
// outnumber the cores: machine_ranks is how many ranks share this kernel's
// `cores` (emulated hosts on one machine share them too). KOLO_SPIN_US,
// KOLO_SPIN_YIELD and KOLO_SEGMENT_BYTES decide where set.
Pacing choose_pacing(const Config& config, int machine_ranks, int cores, size_t l2_bytes);

// The cost model the algorithm tables estimate with, and the hosts' shape.
struct CostShape {
  int host_count = 1;
  int ranks_per_host = 1;
  CostModel costs;
};
// From every rank's facts (host and offers) and KOLO_TRANSPORT: each host's
// first rank's routes say which kinds carry its ranks' traffic, and of
// those the slowest on any host prices the local (same host) and remote
// links, each kind at its own link_cost; KOLO_LINK_COSTS overrides.
// The schedules' units come from `pacing`.
CostShape choose_costs(const Config& config, const std::vector<RankFacts>& facts, const std::string& transport,
                       const Pacing& pacing);

// Where the ranks run, for the hierarchical schedules: the layout when it
// applies (several hosts, the same number of ranks, two or more, on each)
// and KOLO_ALGORITHM is not ring; else nullptr. *hierarchical_refused:
// KOLO_ALGORITHM=hierarchical asked for it where it does not apply.
std::unique_ptr<HostLayout> choose_host_layout(const Config& config, const std::vector<RankFacts>& facts, int rank,
                                               bool* hierarchical_refused);

}  // namespace kolo
