#include "collectives/algorithms.h"

#include <algorithm>

#include "collectives/arena_allreduce.h"
#include "collectives/hierarchical.h"
#include "collectives/recursive_doubling.h"
#include "common/log.h"

namespace kolo {

void add_peer(int peer, int rank, std::vector<int>* out) {
  if (peer != rank && std::find(out->begin(), out->end(), peer) == out->end()) out->push_back(peer);
}

void add_ring_neighbours(const std::vector<int>& members, int index, int rank, std::vector<int>* out) {
  const int n = static_cast<int>(members.size());
  if (n < 2) return;
  add_peer(members[(index + 1) % n], rank, out);
  add_peer(members[(index + n - 1) % n], rank, out);
}

const std::vector<const AllreduceAlgorithm*>& allreduce_algorithms() {
  static const std::vector<const AllreduceAlgorithm*> table = {
      &kHierarchicalAllreduce,
      &kRecursiveDoublingAllreduce,
      &kSharedMemoryAllreduce,
      &kRingAllreduce,
  };
  return table;
}

const std::vector<const AllgatherAlgorithm*>& allgather_algorithms() {
  static const std::vector<const AllgatherAlgorithm*> table = {
      &kHierarchicalAllgather,
      &kRingAllgather,
  };
  return table;
}

const std::vector<const ReduceScatterAlgorithm*>& reduce_scatter_algorithms() {
  static const std::vector<const ReduceScatterAlgorithm*> table = {
      &kHierarchicalReduceScatter,
      &kRingReduceScatter,
  };
  return table;
}

namespace {

template <typename Args>
const Algorithm<Args>& choose(const char* collective, const std::vector<const Algorithm<Args>*>& table,
                              const Topology& topology, const Thresholds& thresholds, const Call& call) {
  for (const Algorithm<Args>* a : table) {
    if (a->applies(topology, thresholds, call)) {
      KOLO_DEBUG(collective << " of " << call.bytes << " bytes: " << a->name);
      return *a;
    }
  }
  return *table.back();  // applies always; reached only if an entry says otherwise
}

bool host_memory(const ScheduleContext& ctx) { return ctx.memory->is_host(); }

}  // namespace

const char* allreduce_algorithm(const Topology& topology, const Thresholds& thresholds, size_t bytes,
                                bool host_memory) {
  Call call;
  call.bytes = bytes;
  call.host_memory = host_memory;
  return choose("allreduce", allreduce_algorithms(), topology, thresholds, call).name;
}

Status allreduce(const ScheduleContext& ctx, const Topology& topology, const Thresholds& thresholds,
                 const AllreduceArgs& args) {
  Call call;
  for (const Span& s : args.spans) call.bytes += s.count * dtype_size(args.dtype);
  call.host_memory = host_memory(ctx);
  return choose("allreduce", allreduce_algorithms(), topology, thresholds, call).run(ctx, topology, args);
}

Status allgather(const ScheduleContext& ctx, const Topology& topology, const Thresholds& thresholds,
                 const AllgatherArgs& args) {
  Call call;
  size_t at = 0;
  for (size_t q = 0; q < args.counts.size(); ++q) {
    call.equal_blocks = call.equal_blocks && args.counts[q] == args.counts[0] && args.displs[q] == at;
    at += args.counts[q];
  }
  call.bytes = at * dtype_size(args.dtype);
  call.host_memory = host_memory(ctx);
  return choose("allgather", allgather_algorithms(), topology, thresholds, call).run(ctx, topology, args);
}

Status reduce_scatter(const ScheduleContext& ctx, const Topology& topology, const Thresholds& thresholds,
                      const ReduceScatterArgs& args) {
  Call call;
  size_t total = 0;
  for (size_t n : args.counts) {
    call.equal_blocks = call.equal_blocks && n == args.counts[0];
    total += n;
  }
  call.bytes = total * dtype_size(args.dtype);
  call.host_memory = host_memory(ctx);
  return choose("reduce_scatter", reduce_scatter_algorithms(), topology, thresholds, call).run(ctx, topology, args);
}

std::vector<int> algorithm_peers(const Topology& topology, const Thresholds& thresholds) {
  std::vector<int> peers;
  for (const auto* a : allreduce_algorithms()) a->peers(topology, thresholds, &peers);
  for (const auto* a : allgather_algorithms()) a->peers(topology, thresholds, &peers);
  for (const auto* a : reduce_scatter_algorithms()) a->peers(topology, thresholds, &peers);
  return peers;
}

}  // namespace kolo
