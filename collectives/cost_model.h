// What each algorithm of the tables (algorithms.h) is estimated to take,
// from what the communicator's links cost: the alpha-beta model NCCL's
// tuner and MPI's collective selection use, with one (latency,
// bandwidth) pair per class of link and a reduction speed. The tables run,
// among the entries that apply, the one estimated fastest; the same
// numbers answer kolo_comm_estimate and are what bench/simulator.h runs the
// schedules over.
//
// Every formula counts what its schedule does (steps, bytes per step, who
// shares a host's network link) and nothing it does not: the constants are
// the links', measured or configured (KOLO_LINK_COSTS), never fitted per
// algorithm. Every rank computes the same costs from the same facts, so
// every rank chooses alike.
#pragma once

#include <cstddef>
#include <string>

#include "collectives/algorithm.h"
#include "common/status.h"
#include "transport/link_cost.h"

namespace kolo {

struct CostModel {
  LinkCost local;   // between ranks of one host
  LinkCost remote;  // between hosts
  std::string local_class = "shm", remote_class = "tcp";  // the kinds that price them, for the log line
  double reduce_bytes_per_s = 8e9;  // one rank reducing one input into its own
  size_t segment_bytes = 2 << 20;   // KOLO_SEGMENT_BYTES: the pipelined schedules' unit
  size_t cache_bytes = 1 << 20;     // pipeline_cache_bytes: one host's halving and doubling block
  int tree_depth = 0;               // double_tree_depth(size), computed once
  int tree_host_load = 2;           // double_tree_host_load(size, ranks per host), computed once
  // Every host's ranks share an arena (shared memory joins them): the
  // hierarchical schedules' phases within a host are priced as the arena's
  // collectives, not as rings (Communicator::open_host_arena).
  bool host_arenas = false;
};

// KOLO_LINK_COSTS: "local=LATENCY_US/GBYTES_PER_S,remote=..." (either or
// both), over the defaults. Malformed: INVALID_ARGUMENT naming the part.
Status parse_link_costs(const std::string& text, CostModel* model);

// The latency tree's segment for an allreduce of `bytes`: the one that
// minimizes the tree's estimate below, (depth + S - 1) steps of
// (latency + s / bandwidth) for S segments of s bytes: at least a few
// latencies' worth of bytes, so the pipeline's start costs little, and
// small enough to fill the depth. At most segment_bytes. The tree runs with
// it, so the estimate is of what runs.
size_t tree_segment_bytes(const CostModel& m, const Topology& t, size_t bytes);

// The estimates, in seconds, for `bytes` (allreduce: the buffer;
// allgather: the result; reduce-scatter: the input).
double ring_allreduce_seconds(const CostModel& m, const Topology& t, size_t bytes);
double recursive_doubling_seconds(const CostModel& m, const Topology& t, size_t bytes);
double halving_doubling_seconds(const CostModel& m, const Topology& t, size_t bytes);
double arena_allreduce_seconds(const CostModel& m, const Topology& t, size_t bytes);
// The arena's single-copy schedule (single_copy_allreduce.h).
double single_copy_allreduce_seconds(const CostModel& m, const Topology& t, size_t bytes);
// The arena's one-shot schedule for a buffer that fits a mailbox
// (arena_allreduce.h).
double one_shot_allreduce_seconds(const CostModel& m, const Topology& t, size_t bytes);
double hierarchical_allreduce_seconds(const CostModel& m, const Topology& t, size_t bytes);
double tree_allreduce_seconds(const CostModel& m, const Topology& t, size_t bytes);
double ring_allgather_seconds(const CostModel& m, const Topology& t, size_t bytes);
double ring_reduce_scatter_seconds(const CostModel& m, const Topology& t, size_t bytes);
double hierarchical_allgather_seconds(const CostModel& m, const Topology& t, size_t bytes);
double hierarchical_reduce_scatter_seconds(const CostModel& m, const Topology& t, size_t bytes);
// The collectives with one schedule each: a pipelined chain around the
// ring (rooted.h) that carries `through_root` bytes in or out of the root
// (broadcast and reduce: the buffer; gather and scatter: the N - 1 other
// blocks), reducing them on the way for reduce; and all-to-all by pairwise
// exchange (alltoall.h) of `bytes` per rank (N blocks).
double chain_seconds(const CostModel& m, const Topology& t, size_t through_root, bool reduces);
// The arena's (one host): a copy through memory takes half a shared-memory
// message's time per byte (a message is a copy in and a copy out).
double arena_allgather_seconds(const CostModel& m, const Topology& t, size_t bytes);
double arena_reduce_scatter_seconds(const CostModel& m, const Topology& t, size_t bytes);
double arena_broadcast_seconds(const CostModel& m, const Topology& t, size_t bytes);
double pairwise_alltoall_seconds(const CostModel& m, const Topology& t, size_t bytes);

}  // namespace kolo
