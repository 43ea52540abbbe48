// The arithmetic of the benchmark, kept apart from any I/O so it is unit
// tested: nccl-tests' bus-bandwidth factors, a latency/bandwidth model of
// the ring, and the step time of data-parallel training with overlap.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kolo::bench {

enum class Collective {
  kAllreduce,
  kAllgather,
  kBroadcast,
  kReduceScatter,
  kReduce,
  kGather,
  kScatter,
  kAllgatherv,
  kReduceScatterv,
  kAlltoall,
  kAlltoallv,
};

bool parse_collective(const std::string& name, Collective* out);
const char* collective_name(Collective c);

// busbw = algbw * factor (nccl-tests): allreduce 2(N-1)/N; allgather and
// reduce-scatter (N-1)/N; broadcast 1.
double bus_factor(Collective c, int ranks);

// Bytes that cross links in total for one call on `bytes` per rank; divided
// by the links' total throughput it is the time no algorithm can beat.
double bytes_on_links(Collective c, int ranks, double bytes);

// algbw in GB/s (1e9 bytes) for `bytes` in `seconds`.
double algbw_gbps(double bytes, double seconds);

// Median of a sample (sorted copy).
double median(std::vector<double> v);

// Ring allreduce cost: 2(N-1) latency-bound hops plus 2(N-1)/N of the
// buffer through each rank's link.
struct RingModel {
  double hop_latency_s = 0;      // alpha
  double link_bytes_per_s = 1;   // beta: one rank's link, one direction
  double allreduce_seconds(double bytes, int ranks) const;
  // Fit from two measured allreduce times at `ranks` ranks: a small message
  // (latency) and a large one (bandwidth).
  static RingModel fit(int ranks, double small_bytes, double small_s, double large_bytes, double large_s);
};

// Data-parallel training step with overlap: gradient bucket b becomes ready
// at ready_s[b] (seconds after the step's backward pass begins) and its
// allreduce takes comm_s[b]; buckets are reduced one at a time, in order,
// each as soon as it is ready and the previous one is done. The step ends
// when the backward pass (backward_s) and the last allreduce have both
// ended. Returns the step time including forward_s.
double overlapped_step_seconds(double forward_s, double backward_s, const std::vector<double>& ready_s,
                               const std::vector<double>& comm_s);

}  // namespace kolo::bench
