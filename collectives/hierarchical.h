// The hierarchical allreduce, for ranks spread over several hosts (Horovod's
// hierarchical allreduce; NCCL's inter-node ring over intra-node rings):
// reduce-scatter among the ranks of each host, an allreduce of each slice
// across hosts among the ranks with the same local index (each carrying
// 1/L of the bytes, L ranks per host, all hosts' links busy at once), then
// allgather within each host. The links between hosts carry 2(H-1)/H of the
// buffer per host where a flat ring's crossing link carries 2(N-1)/N of it.
// The phases within a host go through the host's shared arena where it has
// one (arena_collectives.h: peers read each other's data in place), else
// along the ring of the host's ranks.
#pragma once

#include <string>
#include <vector>

#include "collectives/ring.h"
#include "collectives/wire_format.h"

namespace kolo {

// Where a communicator's ranks run, as the hierarchical schedule needs it.
struct HostLayout {
  std::vector<int> local;  // the ranks of this rank's host, in rank order
  std::vector<int> cross;  // per host (ordered by its lowest rank), its rank with this rank's local index
  std::vector<std::vector<int>> hosts;  // every host's ranks, hosts in the same order
  int local_index = 0;     // this rank's place in `local`
  int host_index = 0;      // this host's place in `cross`
};

// From every rank's host; false where the schedule does not apply: one
// host, one rank per host, or hosts with different numbers of ranks.
bool make_host_layout(const std::vector<std::string>& host_of_rank, int rank, HostLayout* out);

// The context of the ring through `members` (ranks of ctx), this rank at
// position `index`.
ScheduleContext sub_ring(const ScheduleContext& ctx, const std::vector<int>& members, int index);

// recv = reduction of every rank's spans (as ring_allreduce_spans), by the
// schedule above, over `layout`; `host_arena` (nullptr: none) is the arena
// of this rank's host, every rank of `layout.local` in it at its local index.
// A wire format (compressed_ring.h; float sums and averages) applies to the
// links between hosts only: within a host the sums stay exact, and the
// phase across hosts is the compressed ring, so every rank still ends with
// the same bits. residuals: as ring_allreduce_encoded's, per span.
Status hierarchical_allreduce_spans(const ScheduleContext& ctx, const HostLayout& layout, SharedArena* host_arena,
                                    SpanList spans, DataType dtype, ReduceOp op,
                                    WireFormat wire = WireFormat::kNative,
                                    const std::vector<float*>* residuals = nullptr);

// Allgather (as ring_allgather) by the same idea: an allgather of each
// rank's block across hosts among the ranks with its local index, then an
// allgather of those within each host. A host's link carries (H-1)/H of the
// result, a flat ring's crossing link (N-1)/N.
Status hierarchical_allgather(const ScheduleContext& ctx, const HostLayout& layout, SharedArena* host_arena,
                              const void* send, void* recv, size_t send_count, DataType dtype);

// Reduce-scatter (as ring_reduce_scatter), the other way round: within each
// host, then across hosts.
Status hierarchical_reduce_scatter(const ScheduleContext& ctx, const HostLayout& layout, SharedArena* host_arena,
                                   const void* send, void* recv, size_t recv_count, DataType dtype, ReduceOp op);

// Its entries in the tables: where the topology has a host layout, from
// the hierarchical threshold up (allgather and reduce-scatter: equal
// blocks only); each exchanges with its neighbours in the ring of its host
// and in the ring across hosts.
extern const AllreduceAlgorithm kHierarchicalAllreduce;
extern const AllgatherAlgorithm kHierarchicalAllgather;
extern const ReduceScatterAlgorithm kHierarchicalReduceScatter;

}  // namespace kolo
