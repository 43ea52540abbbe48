#include "collectives/tree.h"

#include <algorithm>
#include <deque>
#include <string>

#include "collectives/cost_model.h"
#include "collectives/fingerprint.h"
#include "collectives/ring_schedule.h"
#include "collectives/tree_schedule.h"

namespace kolo {
namespace {

// One segment of one tree's half of the buffer. Steps run in the same
// order on every rank (segment by segment, tree 0 then tree 1), which is
// what keeps the messages between any two ranks in matching order.
struct Step {
  int tree;
  Range range;  // elements of the whole buffer
};

std::vector<Step> tree_steps(size_t count, size_t elem, size_t segment_bytes) {
  const Range half[2] = {partition(count, 2, 0), partition(count, 2, 1)};
  const size_t segments = segments_per_chunk(half[0].count, elem, segment_bytes);
  std::vector<Step> steps;
  for (size_t k = 0; k < segments; ++k) {
    for (int t = 0; t < 2; ++t) {
      Range r = partition(half[t].count, segments, k);
      r.offset += half[t].offset;
      if (r.count > 0) steps.push_back({t, r});  // alike on every rank
    }
  }
  return steps;
}

Status wait_all(const ScheduleContext& ctx, const Request* reqs, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    while (!reqs[i].done) KOLO_RETURN_IF_ERROR(ctx.transport->progress(Deadline::after_seconds(ctx.pipeline.timeout_s)));
  }
  return Status::ok();
}

Status wait_all(const ScheduleContext& ctx, const std::deque<Request>& reqs) {
  for (const Request& r : reqs) KOLO_RETURN_IF_ERROR(wait_all(ctx, &r, 1));
  return Status::ok();
}

}  // namespace

std::vector<int> tree_peers(int rank, int size) {
  std::vector<int> peers;
  for (int t = 0; t < 2; ++t) {
    const TreeLinks links = double_tree_links(size, rank, t);
    if (links.parent >= 0) add_peer(links.parent, rank, &peers);
    for (int c : links.children) add_peer(c, rank, &peers);
  }
  return peers;
}

Status tree_allreduce(const ScheduleContext& ctx, const void* send, void* recv, size_t count, DataType dtype,
                      ReduceOp op) {
  const size_t elem = dtype_size(dtype);
  Memory* m = ctx.memory;
  m->copy(recv, send, count * elem);
  if (count == 0 || ctx.size == 1) {
    m->finalize(dtype, op, recv, count, ctx.size);
    return Status::ok();
  }
  const uint64_t tag = fingerprint(CollectiveKind::kTreeAllreduce, dtype, op, 0, count);
  auto* out = static_cast<unsigned char*>(recv);
  const TreeLinks links[2] = {double_tree_links(ctx.size, ctx.rank, 0), double_tree_links(ctx.size, ctx.rank, 1)};
  const std::vector<Step> steps = tree_steps(count, elem, ctx.segment_bytes);
  size_t largest = 0;
  for (const Step& s : steps) largest = std::max(largest, s.range.count * elem);
  // Two steps' children in flight: [step parity][child].
  auto* staging = static_cast<unsigned char*>(m->staging(4 * largest));
  if (!staging) return device_error("cannot allocate " + std::to_string(4 * largest) + " bytes of staging memory");
  const auto slot = [&](size_t step, size_t child) { return staging + ((step % 2) * 2 + child) * largest; };

  // Up: children's segments into staging, reduced into this rank's own,
  // passed to the parent; the next step's receives are posted before this
  // one's reduction, so the wire keeps moving while this rank computes.
  Request from_child[2][2];
  const auto post_children = [&](size_t i) -> Status {
    const Step& s = steps[i];
    const std::vector<int>& children = links[s.tree].children;
    for (size_t j = 0; j < children.size(); ++j) {
      from_child[i % 2][j] = Request{};
      KOLO_RETURN_IF_ERROR(
          ctx.transport->post_recv(children[j], slot(i, j), s.range.count * elem, tag, &from_child[i % 2][j]));
    }
    return Status::ok();
  };
  std::deque<Request> to_parent;  // addresses stay put as it grows
  if (!steps.empty()) KOLO_RETURN_IF_ERROR(post_children(0));
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    const TreeLinks& l = links[s.tree];
    if (i + 1 < steps.size()) KOLO_RETURN_IF_ERROR(post_children(i + 1));
    KOLO_RETURN_IF_ERROR(wait_all(ctx, from_child[i % 2], l.children.size()));
    unsigned char* mine = out + s.range.offset * elem;
    for (size_t j = 0; j < l.children.size(); ++j) m->reduce(dtype, op, mine, mine, slot(i, j), s.range.count);
    if (l.parent >= 0) {
      to_parent.emplace_back();
      KOLO_RETURN_IF_ERROR(ctx.transport->post_send(l.parent, mine, s.range.count * elem, tag, &to_parent.back()));
    } else {
      m->finalize(dtype, op, mine, s.range.count, ctx.size);  // the root: the segment is done
    }
  }
  // The partial sums must have left before the results overwrite them.
  KOLO_RETURN_IF_ERROR(wait_all(ctx, to_parent));

  // Down: the result from the parent, straight into place, then on to the
  // children.
  std::deque<Request> from_parent, to_children;
  for (const Step& s : steps) {
    from_parent.emplace_back();
    if (links[s.tree].parent < 0) {
      from_parent.back().done = true;
      continue;
    }
    KOLO_RETURN_IF_ERROR(ctx.transport->post_recv(links[s.tree].parent, out + s.range.offset * elem,
                                                  s.range.count * elem, tag, &from_parent.back()));
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step& s = steps[i];
    KOLO_RETURN_IF_ERROR(wait_all(ctx, &from_parent[i], 1));
    for (int c : links[s.tree].children) {
      to_children.emplace_back();
      KOLO_RETURN_IF_ERROR(
          ctx.transport->post_send(c, out + s.range.offset * elem, s.range.count * elem, tag, &to_children.back()));
    }
  }
  return wait_all(ctx, to_children);
}

namespace {

bool applies(const Topology& t, const Thresholds& th, const Call& c) {
  return t.size > 1 && c.bytes > 0 && (t.host_count > 1 || is_forced(th, "tree"));
}

void peers(const Topology& t, const Thresholds& th, std::vector<int>* out) {
  if (t.size < 2 || (t.host_count < 2 && !is_forced(th, "tree"))) return;
  for (int p : tree_peers(t.rank, t.size)) add_peer(p, t.rank, out);
}

Status run(const ScheduleContext& ctx, const Topology&, const AllreduceArgs& a) {
  return allreduce_over_one_buffer(ctx, a, tree_allreduce);
}

double seconds(const Topology& t, const Call& c) { return tree_allreduce_seconds(*t.costs, t, c.bytes); }

}  // namespace

const AllreduceAlgorithm kTreeAllreduce = {"tree", applies, peers, run, seconds};

}  // namespace kolo
