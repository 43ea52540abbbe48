// The collectives whose algorithm depends on the call: allreduce, allgather
// and reduce-scatter, each with one ordered table of algorithm.h entries;
// the first that applies runs (the last applies always). Every entry point
// (blocking, stream, asynchronous, the engine's fused operations, the v
// variants) goes through these, so one call picks alike whatever the entry.
//
//   allreduce:      shared_memory, recursive_doubling, hierarchical,
//                   halving_doubling, tree, ring
//   allgather:      hierarchical, shared_memory, ring
//   reduce_scatter: hierarchical, shared_memory, ring
//   broadcast:      shared_memory, ring (a pipelined chain)
//
// Of the entries that apply, the one the topology's cost model
// (cost_model.h) estimates fastest runs (ties: the earlier), or the one
// KOLO_ALGORITHM names wherever it applies; with no cost model, the first
// that applies.
#pragma once

#include <string>
#include <vector>

#include "collectives/algorithm.h"
#include "collectives/ring.h"

namespace kolo {

const std::vector<const AllreduceAlgorithm*>& allreduce_algorithms();
const std::vector<const AllgatherAlgorithm*>& allgather_algorithms();
const std::vector<const ReduceScatterAlgorithm*>& reduce_scatter_algorithms();
const std::vector<const BroadcastAlgorithm*>& broadcast_algorithms();

// What allreduce runs for a buffer of `bytes`: its name ("ring",
// "recursive_doubling", "halving_doubling", "tree", "hierarchical",
// "shared_memory").
const char* allreduce_algorithm(const Topology& topology, const Thresholds& thresholds, size_t bytes,
                                bool host_memory);

// What a call of `collective` ("allreduce", "allgather", "reduce_scatter",
// "broadcast": its table's choice; "reduce", "gather", "scatter",
// "alltoall": the one schedule each has) of `bytes` would run, and its
// estimated time (0 with no cost model): kolo_comm_estimate. bytes: a
// rank's buffer (gather and scatter: the root's, every rank's block).
// INVALID_ARGUMENT for another name, naming those.
struct Estimate {
  const char* algorithm = "";
  double seconds = 0;
};
Status estimate(const std::string& collective, const Topology& topology, const Thresholds& thresholds, size_t bytes,
                bool host_memory, Estimate* out);

// The allreduce's choice over sizes, for the log: "recursive_doubling up
// to 16K, tree up to 512K, ring above".
std::string allreduce_choices(const Topology& topology, const Thresholds& thresholds);

Status allreduce(const ScheduleContext& ctx, const Topology& topology, const Thresholds& thresholds,
                 const AllreduceArgs& args);
Status allgather(const ScheduleContext& ctx, const Topology& topology, const Thresholds& thresholds,
                 const AllgatherArgs& args);
Status reduce_scatter(const ScheduleContext& ctx, const Topology& topology, const Thresholds& thresholds,
                      const ReduceScatterArgs& args);
Status broadcast(const ScheduleContext& ctx, const Topology& topology, const Thresholds& thresholds,
                 const BroadcastArgs& args);

// Every algorithm name of the tables, each once, in the order they first
// appear (allreduce's, then allgather's, reduce-scatter's, broadcast's):
// what KOLO_ALGORITHM may name besides "auto".
std::vector<std::string> algorithm_names();

// Every peer an algorithm of these tables may exchange with, in the order
// the tables name them.
std::vector<int> algorithm_peers(const Topology& topology, const Thresholds& thresholds);

}  // namespace kolo
