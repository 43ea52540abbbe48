#include "collectives/algorithms.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "collectives/arena_allreduce.h"
#include "collectives/arena_collectives.h"
#include "collectives/choice_memo.h"
#include "collectives/cost_model.h"
#include "collectives/halving_doubling.h"
#include "collectives/hierarchical.h"
#include "collectives/recursive_doubling.h"
#include "collectives/single_copy_allreduce.h"
#include "collectives/tree.h"
#include "common/log.h"

namespace kolo {

void add_peer(int peer, int rank, std::vector<int>* out) {
  if (peer != rank && std::find(out->begin(), out->end(), peer) == out->end()) out->push_back(peer);
}

void no_peers(const Topology&, const Thresholds&, std::vector<int>*) {}

void add_ring_neighbours(const std::vector<int>& members, int index, int rank, std::vector<int>* out) {
  const int n = static_cast<int>(members.size());
  if (n < 2) return;
  add_peer(members[(index + 1) % n], rank, out);
  add_peer(members[(index + n - 1) % n], rank, out);
}

Status allreduce_over_one_buffer(const ScheduleContext& ctx, const AllreduceArgs& a, ContiguousAllreduce allreduce) {
  const SpanList spans = a.spans;
  const size_t total = spans.elements();
  if (spans.size() == 1) return allreduce(ctx, spans[0].send, spans[0].recv, total, a.dtype, a.op);
  const size_t elem_size = dtype_size(a.dtype);
  auto* buf = static_cast<unsigned char*>(ctx.memory->scratch(total * elem_size));
  if (!buf) return device_error("cannot allocate " + std::to_string(total * elem_size) + " bytes of scratch memory");
  size_t at = 0;
  for (const Span& s : spans) {
    ctx.memory->copy(buf + at, s.send, s.count * elem_size);
    at += s.count * elem_size;
  }
  KOLO_RETURN_IF_ERROR(allreduce(ctx, buf, buf, total, a.dtype, a.op));
  at = 0;
  for (const Span& s : spans) {
    ctx.memory->copy(s.recv, buf + at, s.count * elem_size);
    at += s.count * elem_size;
  }
  return Status::ok();
}

const std::vector<const AllreduceAlgorithm*>& allreduce_algorithms() {
  // The arena before recursive doubling: on two ranks the model prices
  // the arena's one-shot and one exchange of recursive doubling alike (a
  // hop, and a copy each way), and the one-shot runs faster
  // (docs/performance.md). Where KOLO_ALGORITHM=shared_memory, the first
  // of its two entries that applies: the one-shot where it fits.
  static const std::vector<const AllreduceAlgorithm*> table = {
      &kSharedMemoryOneShotAllreduce,
      &kSharedMemorySingleCopyAllreduce,
      &kSharedMemoryAllreduce,
      &kRecursiveDoublingAllreduce,
      &kHierarchicalAllreduce,
      &kHalvingDoublingAllreduce,
      &kTreeAllreduce,
      &kRingAllreduce,
  };
  return table;
}

const std::vector<const AllgatherAlgorithm*>& allgather_algorithms() {
  static const std::vector<const AllgatherAlgorithm*> table = {
      &kHierarchicalAllgather,
      &kSharedMemoryAllgather,
      &kRingAllgather,
  };
  return table;
}

const std::vector<const ReduceScatterAlgorithm*>& reduce_scatter_algorithms() {
  static const std::vector<const ReduceScatterAlgorithm*> table = {
      &kHierarchicalReduceScatter,
      &kSharedMemoryReduceScatter,
      &kRingReduceScatter,
  };
  return table;
}

const std::vector<const BroadcastAlgorithm*>& broadcast_algorithms() {
  static const std::vector<const BroadcastAlgorithm*> table = {
      &kSharedMemoryBroadcast,
      &kRingBroadcast,
  };
  return table;
}

namespace {

template <typename Args>
const Algorithm<Args>& choose(const char* collective, const std::vector<const Algorithm<Args>*>& table,
                              const Topology& topology, const Thresholds& thresholds, const Call& call) {
  const Algorithm<Args>* best = nullptr;
  double best_s = 0;
  for (const Algorithm<Args>* a : table) {
    if (call.wire != WireFormat::kNative && !a->carries_wire_formats) continue;
    if (!a->applies(topology, thresholds, call)) continue;
    if (is_forced(thresholds, a->name)) {
      best = a;
      break;
    }
    if (!topology.costs) {
      if (!best) best = a;  // table order
      continue;
    }
    const double s = a->seconds(topology, call);
    if (!best || s < best_s) best = a, best_s = s;  // ties: the earlier entry
  }
  if (!best) best = table.back();  // applies always; reached only if an entry says otherwise
  KOLO_DEBUG(collective << " of " << call.bytes << " bytes: " << best->name);
  return *best;
}

// choose(), through the topology's memo where it has one: what the
// collectives below run.
template <typename Args>
const Algorithm<Args>& choose_to_run(const char* collective, ChoiceMemo::Table id,
                                     const std::vector<const Algorithm<Args>*>& table, const Topology& topology,
                                     const Thresholds& thresholds, const Call& call) {
  ChoiceMemo* memo = topology.choices;
  if (!memo) return choose(collective, table, topology, thresholds, call);
  if (const void* known = memo->find(id, topology, thresholds, call)) {
    return *static_cast<const Algorithm<Args>*>(known);
  }
  const Algorithm<Args>& chosen = choose(collective, table, topology, thresholds, call);
  memo->remember(id, topology, thresholds, call, &chosen);
  return chosen;
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

namespace {

// One row per collective kolo_comm_estimate names.
struct NamedEstimate {
  const char* collective;
  Estimate (*of)(const Topology& topology, const Thresholds& thresholds, const Call& call);
};

template <typename Table>
Estimate chosen(const char* collective, const Table& table, const Topology& t, const Thresholds& th, const Call& call) {
  const auto& a = choose(collective, table, t, th, call);
  return {a.name, t.costs ? a.seconds(t, call) : 0};
}

// A root's chain through every rank (rooted.h): gather and scatter move
// every block but the root's own through it.
Estimate chain(const Topology& t, size_t through_root, bool reduces) {
  return {"chain", t.costs ? chain_seconds(*t.costs, t, through_root, reduces) : 0};
}

const NamedEstimate kNamedEstimates[] = {
    {"allreduce", [](const Topology& t, const Thresholds& th, const Call& c) {
       return chosen("allreduce", allreduce_algorithms(), t, th, c);
     }},
    {"allgather", [](const Topology& t, const Thresholds& th, const Call& c) {
       return chosen("allgather", allgather_algorithms(), t, th, c);
     }},
    {"reduce_scatter", [](const Topology& t, const Thresholds& th, const Call& c) {
       return chosen("reduce_scatter", reduce_scatter_algorithms(), t, th, c);
     }},
    {"broadcast", [](const Topology& t, const Thresholds& th, const Call& c) {
       return chosen("broadcast", broadcast_algorithms(), t, th, c);
     }},
    {"reduce", [](const Topology& t, const Thresholds&, const Call& c) { return chain(t, c.bytes, true); }},
    {"gather", [](const Topology& t, const Thresholds&, const Call& c) {
       return chain(t, c.bytes / t.size * (t.size - 1), false);
     }},
    {"scatter", [](const Topology& t, const Thresholds&, const Call& c) {
       return chain(t, c.bytes / t.size * (t.size - 1), false);
     }},
    {"alltoall", [](const Topology& t, const Thresholds&, const Call& c) {
       return Estimate{"pairwise", t.costs ? pairwise_alltoall_seconds(*t.costs, t, c.bytes) : 0};
     }},
};

}  // namespace

Status estimate(const std::string& collective, const Topology& topology, const Thresholds& thresholds, size_t bytes,
                bool host_memory, Estimate* out) {
  Call call;
  call.bytes = bytes;
  call.host_memory = host_memory;
  std::string names;
  for (const NamedEstimate& row : kNamedEstimates) {
    if (collective == row.collective) {
      *out = row.of(topology, thresholds, call);
      return Status::ok();
    }
    names += std::string(names.empty() ? "" : ", ") + row.collective;
  }
  return invalid_argument("collective '" + collective + "': use " + names);
}

std::string allreduce_choices(const Topology& topology, const Thresholds& thresholds) {
  std::string text;
  const char* current = nullptr;
  const auto size_name = [](size_t b) {
    if (b >= (size_t{1} << 30) && b % (size_t{1} << 30) == 0) return std::to_string(b >> 30) + "G";
    if (b >= (1u << 20) && b % (1u << 20) == 0) return std::to_string(b >> 20) + "M";
    if (b >= (1u << 10) && b % (1u << 10) == 0) return std::to_string(b >> 10) + "K";
    return std::to_string(b);
  };
  // Powers of two from 4 bytes to 1 GiB: each entry's range, as far as
  // the next size that chose another.
  for (size_t b = 4; b <= (size_t{1} << 30); b *= 2) {
    const char* name = allreduce_algorithm(topology, thresholds, b, /*host_memory=*/true);
    if (current && std::strcmp(name, current) != 0) text += std::string(current) + " up to " + size_name(b / 2) + ", ";
    current = name;
  }
  return text + current + (text.empty() ? " at every size" : " above");
}

Status allreduce(const ScheduleContext& ctx, const Topology& topology, const Thresholds& thresholds,
                 const AllreduceArgs& args) {
  Call call;
  for (const Span& s : args.spans) call.bytes += s.count * dtype_size(args.dtype);
  call.host_memory = host_memory(ctx);
  call.wire = args.wire;
  return choose_to_run("allreduce", ChoiceMemo::kAllreduce, allreduce_algorithms(), topology, thresholds, call)
      .run(ctx, topology, args);
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
  return choose_to_run("allgather", ChoiceMemo::kAllgather, allgather_algorithms(), topology, thresholds, call)
      .run(ctx, topology, args);
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
  return choose_to_run("reduce_scatter", ChoiceMemo::kReduceScatter, reduce_scatter_algorithms(), topology,
                       thresholds, call)
      .run(ctx, topology, args);
}

Status broadcast(const ScheduleContext& ctx, const Topology& topology, const Thresholds& thresholds,
                 const BroadcastArgs& args) {
  Call call;
  call.bytes = args.count * dtype_size(args.dtype);
  call.host_memory = host_memory(ctx);
  return choose_to_run("broadcast", ChoiceMemo::kBroadcast, broadcast_algorithms(), topology, thresholds, call)
      .run(ctx, topology, args);
}

std::vector<std::string> algorithm_names() {
  std::vector<std::string> names;
  auto add = [&](const auto& table) {
    for (const auto* entry : table) {
      if (std::find(names.begin(), names.end(), entry->name) == names.end()) names.push_back(entry->name);
    }
  };
  add(allreduce_algorithms());
  add(allgather_algorithms());
  add(reduce_scatter_algorithms());
  add(broadcast_algorithms());
  return names;
}

std::vector<int> algorithm_peers(const Topology& topology, const Thresholds& thresholds) {
  std::vector<int> peers;
  for (const auto* a : allreduce_algorithms()) a->peers(topology, thresholds, &peers);
  for (const auto* a : allgather_algorithms()) a->peers(topology, thresholds, &peers);
  for (const auto* a : reduce_scatter_algorithms()) a->peers(topology, thresholds, &peers);
  for (const auto* a : broadcast_algorithms()) a->peers(topology, thresholds, &peers);
  return peers;
}

}  // namespace kolo
