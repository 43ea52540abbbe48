#include "collectives/hierarchical.h"

#include <algorithm>
#include <map>

#include "collectives/arena_collectives.h"
#include "collectives/compressed_ring.h"
#include "collectives/cost_model.h"
#include "collectives/ring_schedule.h"
#include "collectives/span_cutter.h"

namespace kolo {

bool make_host_layout(const std::vector<std::string>& host_of_rank, int rank, HostLayout* out) {
  std::map<std::string, std::vector<int>> by_host;
  std::vector<std::string> order;  // hosts by their lowest rank
  for (int r = 0; r < static_cast<int>(host_of_rank.size()); ++r) {
    auto& ranks = by_host[host_of_rank[r]];
    if (ranks.empty()) order.push_back(host_of_rank[r]);
    ranks.push_back(r);
  }
  const size_t per_host = by_host.begin()->second.size();
  if (order.size() < 2 || per_host < 2) return false;
  for (const auto& h : by_host) {
    if (h.second.size() != per_host) return false;
  }
  HostLayout layout;
  layout.local = by_host[host_of_rank[rank]];
  for (const std::string& h : order) layout.hosts.push_back(by_host[h]);
  layout.local_index = static_cast<int>(std::find(layout.local.begin(), layout.local.end(), rank) - layout.local.begin());
  for (size_t h = 0; h < order.size(); ++h) {
    if (order[h] == host_of_rank[rank]) layout.host_index = static_cast<int>(h);
    layout.cross.push_back(by_host[order[h]][layout.local_index]);
  }
  *out = std::move(layout);
  return true;
}

ScheduleContext sub_ring(const ScheduleContext& ctx, const std::vector<int>& members, int index) {
  ScheduleContext sub = ctx;
  const int n = static_cast<int>(members.size());
  sub.rank = index;
  sub.size = n;
  sub.left = members[(index + n - 1) % n];
  sub.right = members[(index + 1) % n];
  sub.reduce_scatter_done = nullptr;
  return sub;
}

namespace {

// The phases within a host: through the host's arena where there is one and
// the buffers are the host's (every rank of the host decides alike: the
// same arena, and a rank with device buffers fails the arena's opening
// check with MISMATCH), else along the ring of the host's ranks. Blocks
// lie in rank order, block q of `counts[q]` elements.
bool through_arena(const ScheduleContext& local, SharedArena* arena) {
  return arena != nullptr && local.memory->is_host();
}

Status reduce_scatter_within_host(const ScheduleContext& local, SharedArena* arena, const void* in, void* out,
                                  const std::vector<size_t>& counts, DataType dtype, ReduceOp op) {
  if (through_arena(local, arena)) return arena_reduce_scatter(local, *arena, ReduceScatterArgs{in, out, counts, dtype, op});
  return ring_reduce_scatter_v(local, in, out, counts, dtype, op);
}

Status allgather_within_host(const ScheduleContext& local, SharedArena* arena, const void* in, void* out,
                             const std::vector<size_t>& counts, DataType dtype) {
  if (!through_arena(local, arena)) return ring_allgather_v(local, in, out, counts, dtype);
  return arena_allgather(local, *arena, AllgatherArgs{in, out, counts, packed_displs(counts), dtype});
}

// The phase across hosts in a wire format: this rank's slice (elements
// [mine.offset, +count) of the spans' concatenation, at `slice`) summed by
// the compressed ring among the hosts. Each host's sum is exact (float32
// within the host); only the links between hosts carry the format. With
// error feedback, the slice's elements take their residuals from the spans'
// arrays at the same places: this rank encodes those elements only.
Status cross_hosts_encoded(const ScheduleContext& cross, SpanList spans, const Range& mine,
                           unsigned char* slice, size_t elem_size, DataType dtype, WireFormat wire,
                           const std::vector<float*>* residuals) {
  std::vector<Span> parts;
  std::vector<float*> part_residuals;
  size_t at = 0;  // elements of the slice cut so far
  SpanCutter(spans).for_each_piece(mine, [&](const Span& span, size_t first, size_t count) {
    parts.push_back(Span{slice + at * elem_size, slice + at * elem_size, count});
    if (residuals) part_residuals.push_back((*residuals)[&span - spans.data()] + first);
    at += count;
  });
  return ring_allreduce_encoded(cross, parts, dtype, ReduceOp::kSum, wire, residuals ? &part_residuals : nullptr);
}

}  // namespace

Status hierarchical_allreduce_spans(const ScheduleContext& ctx, const HostLayout& layout, SharedArena* host_arena,
                                    SpanList spans, DataType dtype, ReduceOp op, WireFormat wire,
                                    const std::vector<float*>* residuals) {
  const size_t elem_size = dtype_size(dtype);
  const size_t total = spans.elements();
  // One contiguous buffer: recv itself when there is one span, else the
  // spans packed (a copy at memory speed, next to links between hosts).
  const bool direct = spans.size() == 1;
  unsigned char* buf = direct ? static_cast<unsigned char*>(spans[0].recv)
                              : static_cast<unsigned char*>(ctx.memory->packing(total * elem_size));
  if (!buf) return device_error("cannot allocate " + std::to_string(total * elem_size) + " bytes of scratch memory");
  const void* input = direct ? spans[0].send : buf;
  if (!direct) {
    size_t at = 0;
    for (const Span& s : spans) {
      ctx.memory->copy(buf + at, s.send, s.count * elem_size);
      at += s.count * elem_size;
    }
  }
  const int l = static_cast<int>(layout.local.size());
  const int n = l * static_cast<int>(layout.cross.size());
  const RingLayout chunks(total, l, elem_size, ctx.segment_bytes);
  std::vector<size_t> counts(l);
  for (int c = 0; c < l; ++c) counts[c] = chunks.chunk(c).count;
  const Range mine = chunks.chunk(layout.local_index);
  unsigned char* slice = buf + mine.offset * elem_size;
  // An average is a sum until the whole job's is known, divided once.
  const ReduceOp sum_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  ScheduleContext local = sub_ring(ctx, layout.local, layout.local_index);
  ScheduleContext cross = sub_ring(ctx, layout.cross, layout.host_index);
  KOLO_RETURN_IF_ERROR(reduce_scatter_within_host(local, host_arena, input, slice, counts, dtype, sum_op));
  if (ctx.reduce_scatter_done) *ctx.reduce_scatter_done = std::chrono::steady_clock::now();
  if (wire == WireFormat::kNative) {
    KOLO_RETURN_IF_ERROR(ring_allreduce(cross, slice, slice, mine.count, dtype, sum_op));
  } else {
    KOLO_RETURN_IF_ERROR(cross_hosts_encoded(cross, spans, mine, slice, elem_size, dtype, wire, residuals));
  }
  if (op == ReduceOp::kAvg) ctx.memory->finalize(dtype, op, slice, mine.count, n);
  KOLO_RETURN_IF_ERROR(allgather_within_host(local, host_arena, slice, buf, counts, dtype));
  if (!direct) {
    size_t at = 0;
    for (const Span& s : spans) {
      ctx.memory->copy(s.recv, buf + at, s.count * elem_size);
      at += s.count * elem_size;
    }
  }
  return Status::ok();
}

Status hierarchical_allgather(const ScheduleContext& ctx, const HostLayout& layout, SharedArena* host_arena,
                              const void* send, void* recv, size_t send_count, DataType dtype) {
  const size_t elem = dtype_size(dtype), block = send_count * elem;
  const size_t h = layout.cross.size(), l = layout.local.size();
  auto* out = static_cast<unsigned char*>(recv);
  // "In place" is send == recv, or send already at this rank's block.
  const void* mine = send == recv ? out + ctx.rank * block : send;
  // Across hosts: by_host[k] = block of host k's rank with this local index.
  auto* by_host = static_cast<unsigned char*>(ctx.memory->packing(h * block + h * l * block));
  if (!by_host) return device_error("cannot allocate " + std::to_string((h + h * l) * block) + " bytes of scratch memory");
  unsigned char* gathered = by_host + h * block;  // [local index][host] blocks
  KOLO_RETURN_IF_ERROR(ring_allgather(sub_ring(ctx, layout.cross, layout.host_index), mine, by_host, send_count, dtype));
  // Within the host: every local index's H blocks.
  KOLO_RETURN_IF_ERROR(allgather_within_host(sub_ring(ctx, layout.local, layout.local_index), host_arena, by_host,
                                             gathered, std::vector<size_t>(l, h * send_count), dtype));
  for (size_t li = 0; li < l; ++li) {
    for (size_t hi = 0; hi < h; ++hi) {
      ctx.memory->copy(out + layout.hosts[hi][li] * block, gathered + (li * h + hi) * block, block);
    }
  }
  return Status::ok();
}

Status hierarchical_reduce_scatter(const ScheduleContext& ctx, const HostLayout& layout, SharedArena* host_arena,
                                   const void* send, void* recv, size_t recv_count, DataType dtype, ReduceOp op) {
  const size_t elem = dtype_size(dtype), block = recv_count * elem;
  const size_t h = layout.cross.size(), l = layout.local.size();
  const auto* in = static_cast<const unsigned char*>(send);
  // The input regrouped by local index: [local index][host] blocks, then
  // room for this local index's H host sums.
  auto* grouped = static_cast<unsigned char*>(ctx.memory->packing(h * l * block + h * block));
  if (!grouped) return device_error("cannot allocate " + std::to_string((h * l + h) * block) + " bytes of scratch memory");
  unsigned char* host_sums = grouped + h * l * block;
  for (size_t li = 0; li < l; ++li) {
    for (size_t hi = 0; hi < h; ++hi) {
      ctx.memory->copy(grouped + (li * h + hi) * block, in + layout.hosts[hi][li] * block, block);
    }
  }
  // An average is a sum until the whole job's is known, divided once.
  const ReduceOp sum_op = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
  KOLO_RETURN_IF_ERROR(reduce_scatter_within_host(sub_ring(ctx, layout.local, layout.local_index), host_arena, grouped,
                                                 host_sums, std::vector<size_t>(l, h * recv_count), dtype, sum_op));
  KOLO_RETURN_IF_ERROR(
      ring_reduce_scatter(sub_ring(ctx, layout.cross, layout.host_index), host_sums, recv, recv_count, dtype, sum_op));
  if (op == ReduceOp::kAvg) ctx.memory->finalize(dtype, op, recv, recv_count, static_cast<int>(h * l));
  return Status::ok();
}

namespace {

bool applies(const Topology& t, const Thresholds&, const Call& c) { return t.hosts != nullptr && c.bytes > 0; }

bool applies_to_equal_blocks(const Topology& t, const Thresholds& th, const Call& c) {
  return c.equal_blocks && applies(t, th, c);
}

void peers(const Topology& t, const Thresholds&, std::vector<int>* out) {
  if (!t.hosts) return;
  add_ring_neighbours(t.hosts->local, t.hosts->local_index, t.rank, out);
  add_ring_neighbours(t.hosts->cross, t.hosts->host_index, t.rank, out);
}

Status run_allreduce(const ScheduleContext& ctx, const Topology& t, const AllreduceArgs& a) {
  return hierarchical_allreduce_spans(ctx, *t.hosts, t.host_arena, a.spans, a.dtype, a.op, a.wire, a.residuals);
}

Status run_allgather(const ScheduleContext& ctx, const Topology& t, const AllgatherArgs& a) {
  return hierarchical_allgather(ctx, *t.hosts, t.host_arena, a.send, a.recv, a.counts[0], a.dtype);
}

Status run_reduce_scatter(const ScheduleContext& ctx, const Topology& t, const ReduceScatterArgs& a) {
  return hierarchical_reduce_scatter(ctx, *t.hosts, t.host_arena, a.send, a.recv, a.counts[0], a.dtype, a.op);
}

double allreduce_seconds(const Topology& t, const Call& c) {
  return hierarchical_allreduce_seconds(*t.costs, t, c.bytes);
}
double allgather_seconds(const Topology& t, const Call& c) {
  return hierarchical_allgather_seconds(*t.costs, t, c.bytes);
}
double reduce_scatter_seconds(const Topology& t, const Call& c) {
  return hierarchical_reduce_scatter_seconds(*t.costs, t, c.bytes);
}

}  // namespace

const AllreduceAlgorithm kHierarchicalAllreduce = {"hierarchical", applies, peers, run_allreduce,
                                                   allreduce_seconds, /*carries_wire_formats=*/true};
const AllgatherAlgorithm kHierarchicalAllgather = {"hierarchical", applies_to_equal_blocks, peers, run_allgather,
                                                   allgather_seconds};
const ReduceScatterAlgorithm kHierarchicalReduceScatter = {"hierarchical", applies_to_equal_blocks, peers,
                                                           run_reduce_scatter, reduce_scatter_seconds};

}  // namespace kolo
