// What an algorithm of a collective is, for the ordered tables
// (algorithms.h) that choose one per call, as Horovod's OperationManager
// lists and NCCL's tuning tables do: a name, when it applies, which peers it
// exchanges with (connected when the communicator is made), and how it
// runs. Each algorithm's file defines its entries; adding one is its file
// and a line in a table.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include "collectives/dtype.h"
#include "collectives/wire_format.h"
#include "common/status.h"

namespace kolo {

class ChoiceMemo;
struct CostModel;
struct HostLayout;
class SharedArena;
struct ScheduleContext;

// A piece of a larger logical buffer: count elements read from send and
// written to recv (send == recv is in place).
struct Span {
  const void* send;
  void* recv;
  size_t count;
};

// What the runtime engine multiplies a span's elements by before its
// allreduce (pre) and after (post): a tensor's prescale and postscale.
struct SpanScale {
  double pre = 1;
  double post = 1;
};

// Spans seen where they lie (a call's one span on its stack, the fusion
// engine's vector): a blocking allreduce allocates nothing for them.
class SpanList {
 public:
  SpanList(const std::vector<Span>& spans) : data_(spans.data()), size_(spans.size()) {}  // NOLINT: a view of it
  template <size_t N>
  SpanList(const Span (&spans)[N]) : data_(spans), size_(N) {}  // NOLINT: likewise
  const Span* begin() const { return data_; }
  const Span* end() const { return data_ + size_; }
  const Span* data() const { return data_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Span& operator[](size_t i) const { return data_[i]; }
  // The elements of all the spans: the logical buffer's length.
  size_t elements() const {
    size_t total = 0;
    for (const Span& s : *this) total += s.count;
    return total;
  }

 private:
  const Span* data_;
  size_t size_;
};

// Where a communicator's ranks run and what they share: with a call, what
// decides which algorithm applies. (ScheduleContext is what a schedule runs
// with: transport, neighbours, pipeline, memory.)
struct Topology {
  int rank = 0;
  int size = 1;
  // Ranks spread over several hosts, the same number (two or more) on
  // each, as the hierarchical schedules need (hierarchical.h); else nullptr.
  const HostLayout* hosts = nullptr;
  // Memory every rank maps, when all run on this host (arena_allreduce.h);
  // else nullptr.
  SharedArena* arena = nullptr;
  // Whether the arena's ranks can read each other's memory (as its
  // reads_peers() says): the single copy applies (single_copy_allreduce.h).
  bool arena_reads_peers = false;
  // Memory the ranks of this rank's host map, where the ranks span several
  // hosts: the hierarchical schedules' phases within a host go through it
  // (hierarchical.h); else nullptr.
  SharedArena* host_arena = nullptr;
  // Hosts the ranks run on, and the most ranks any of them holds.
  int host_count = 1;
  int ranks_per_host = 1;
  // What the links cost (cost_model.h): among the entries that apply, the
  // tables choose the one it estimates fastest. nullptr: the first that
  // applies, in table order.
  const CostModel* costs = nullptr;
  // The communicator's recent choices (choice_memo.h), for the collectives
  // it runs under its call lock; nullptr: choose every time.
  ChoiceMemo* choices = nullptr;
};

// What the settings allow (KOLO_SMALL_ALLREDUCE_BYTES, KOLO_ALGORITHM).
struct Thresholds {
  size_t small_bytes = 0;  // recursive doubling may run up to here
  // KOLO_ALGORITHM naming one entry: it runs wherever it applies (the
  // limit above lifted), the cost model elsewhere. nullptr: auto.
  const char* forced = nullptr;
};

inline bool is_forced(const Thresholds& th, const char* name) {
  return th.forced != nullptr && std::strcmp(th.forced, name) == 0;
}

// One call, as a table sees it.
struct Call {
  size_t bytes = 0;           // allreduce, broadcast: the buffer; allgather: the result; reduce-scatter: the input
  bool equal_blocks = true;   // allgather, reduce-scatter: every rank's block the same, packed in rank order
  bool host_memory = true;    // the buffers are the host's, not a GPU's
  WireFormat wire = WireFormat::kNative;  // allreduce: what its messages carry (wire_format.h)
};

template <typename Args>
struct Algorithm {
  const char* name;
  bool (*applies)(const Topology&, const Thresholds&, const Call&);
  // Adds the ranks it may exchange with (any call), for the communicator to
  // connect up front: a connection made inside a collective could leave a
  // rank waiting for a peer that has already failed.
  void (*peers)(const Topology&, const Thresholds&, std::vector<int>* out);
  Status (*run)(const ScheduleContext&, const Topology&, const Args&);
  // Its estimated time for the call, from topology.costs (never nullptr
  // here): what the tables compare.
  double (*seconds)(const Topology&, const Call&);
  // Whether it can send a call's elements in a wire format (Call::wire):
  // only entries that can are chosen for such a call.
  bool carries_wire_formats = false;
};

// The arguments of each collective's algorithms (already validated).
struct AllreduceArgs {
  SpanList spans;  // one allreduce over their concatenation
  DataType dtype;
  ReduceOp op;
  WireFormat wire = WireFormat::kNative;  // kNative: the elements themselves
  // Error feedback for a wire format: one float array per span, or nullptr
  // (compressed_ring.h).
  const std::vector<float*>* residuals = nullptr;
};
// Where blocks of `counts` elements start when they lie one after another
// in rank order (the displacements a `v` collective takes by default).
inline std::vector<size_t> packed_displs(const std::vector<size_t>& counts) {
  std::vector<size_t> displs(counts.size(), 0);
  for (size_t q = 1; q < counts.size(); ++q) displs[q] = displs[q - 1] + counts[q - 1];
  return displs;
}

struct AllgatherArgs {
  const void* send;
  void* recv;
  const std::vector<size_t>& counts;  // rank q's block: counts[q] elements ...
  const std::vector<size_t>& displs;  // ... at displs[q] in recv
  DataType dtype;
};
struct ReduceScatterArgs {
  const void* send;  // counts[0] + ... elements, rank order
  void* recv;        // this rank's counts[rank] elements
  const std::vector<size_t>& counts;
  DataType dtype;
  ReduceOp op;
};

struct BroadcastArgs {
  void* buf;  // root's count elements in, every other rank's out
  size_t count;
  DataType dtype;
  int root;
};

using AllreduceAlgorithm = Algorithm<AllreduceArgs>;
using AllgatherAlgorithm = Algorithm<AllgatherArgs>;
using ReduceScatterAlgorithm = Algorithm<ReduceScatterArgs>;
using BroadcastAlgorithm = Algorithm<BroadcastArgs>;

// An allreduce of one contiguous buffer (send == recv in place).
using ContiguousAllreduce = Status (*)(const ScheduleContext&, const void* send, void* recv, size_t count,
                                       DataType dtype, ReduceOp op);
// Runs `allreduce` over the spans' concatenation: directly for one span,
// else through one packed scratch buffer (what the latency-bound
// algorithms do with fused tensors; the copies cost little next to their
// exchanges).
Status allreduce_over_one_buffer(const ScheduleContext& ctx, const AllreduceArgs& args, ContiguousAllreduce allreduce);

// Peer helpers for entries.
void add_peer(int peer, int rank, std::vector<int>* out);  // once, never rank itself
void no_peers(const Topology&, const Thresholds&, std::vector<int>* out);  // exchanges through memory only
void add_ring_neighbours(const std::vector<int>& members, int index, int rank, std::vector<int>* out);

}  // namespace kolo
