#include "collectives/tree.h"

#include <algorithm>
#include <array>
#include <deque>
#include <map>
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
  const size_t n = steps.size();
  const auto at = [&](size_t i) { return out + steps[i].range.offset * elem; };
  const auto bytes = [&](size_t i) { return steps[i].range.count * elem; };
  const auto progress = [&] {
    return ctx.transport->progress(Deadline::after_seconds_coarse(ctx.pipeline.timeout_s));
  };
  size_t largest = 0;
  for (const Step& s : steps) largest = std::max(largest, s.range.count * elem);
  // Children's segments land in a window of steps' slots, two per step.
  const size_t window = std::max<size_t>(2, ctx.pipeline.staging_slots);
  auto* staging = static_cast<unsigned char*>(m->staging(window * 2 * largest));
  if (!staging) return device_error("cannot allocate " + std::to_string(window * 2 * largest) + " bytes of staging memory");
  const auto slot = [&](size_t i, size_t child) { return staging + ((i % window) * 2 + child) * largest; };

  // The two trees go at their own pace: a step runs as soon as its own
  // data is there, whatever the other tree's steps wait for. What keeps
  // the two ends of every pair agreeing on which message is which is that
  // each posts its sends to a peer, and its receives from a peer, in the
  // steps' order. Each tree's steps complete in their order (one parent,
  // the same children, messages matched in order), so a cursor per tree
  // finds the next one to look at.
  std::vector<bool> ready(n, false);
  std::deque<Request> sends;        // addresses stay put as it grows
  std::map<int, size_t> next_send;  // per peer: the first step whose send to it is not posted
  const auto post_ready_sends = [&](const std::vector<std::vector<int>>& to) -> Status {
    for (auto& [peer, i] : next_send) {
      for (; i < n; ++i) {
        const auto& targets = to[i];
        if (std::find(targets.begin(), targets.end(), peer) == targets.end()) continue;
        if (!ready[i]) break;
        sends.emplace_back();
        KOLO_RETURN_IF_ERROR(ctx.transport->post_send(peer, at(i), bytes(i), tag, &sends.back()));
      }
    }
    return Status::ok();
  };
  const auto all_sends_done = [&] {
    for (const Request& r : sends) {
      if (!r.done) return false;
    }
    return true;
  };
  const auto next_of_tree = [&](int t, size_t from) {
    while (from < n && steps[from].tree != t) ++from;
    return from;
  };

  // Up: each step's children's segments reduced into this rank's own and
  // passed to the parent; the roots finish theirs.
  std::vector<std::vector<int>> up(n);
  for (size_t i = 0; i < n; ++i) {
    const TreeLinks& l = links[steps[i].tree];
    if (l.parent >= 0) up[i] = {l.parent}, next_send.emplace(l.parent, 0);
  }
  std::vector<std::array<Request, 2>> from_child(n);
  std::vector<bool> reduced(n, false);
  size_t posted = 0, reduced_count = 0;
  size_t cursor[2] = {next_of_tree(0, 0), next_of_tree(1, 0)};
  while (reduced_count < n) {
    // Receives in the steps' order, as far as the window's slots allow
    // (a slot is free once the step that used it is reduced).
    for (; posted < n && (posted < window || reduced[posted - window]); ++posted) {
      const std::vector<int>& children = links[steps[posted].tree].children;
      for (size_t j = 0; j < children.size(); ++j) {
        KOLO_RETURN_IF_ERROR(
            ctx.transport->post_recv(children[j], slot(posted, j), bytes(posted), tag, &from_child[posted][j]));
      }
    }
    bool moved = false;
    for (int t = 0; t < 2; ++t) {
      for (size_t& i = cursor[t]; i < posted; i = next_of_tree(t, i + 1)) {
        const std::vector<int>& children = links[t].children;
        bool arrived = true;
        for (size_t j = 0; j < children.size(); ++j) arrived = arrived && from_child[i][j].done;
        if (!arrived) break;
        for (size_t j = 0; j < children.size(); ++j) m->reduce(dtype, op, at(i), at(i), slot(i, j), steps[i].range.count);
        if (links[t].parent < 0) m->finalize(dtype, op, at(i), steps[i].range.count, ctx.size);
        reduced[i] = ready[i] = true;
        ++reduced_count;
        moved = true;
      }
    }
    KOLO_RETURN_IF_ERROR(post_ready_sends(up));
    if (!moved && reduced_count < n) KOLO_RETURN_IF_ERROR(progress());
  }
  // The partial sums must have left before the results overwrite them.
  while (!all_sends_done()) KOLO_RETURN_IF_ERROR(progress());

  // Down: the result from the parent, straight into place, then on to the
  // children.
  sends.clear();
  next_send.clear();
  std::vector<std::vector<int>> down(n);
  std::vector<Request> from_parent(n);
  for (size_t i = 0; i < n; ++i) {
    const TreeLinks& l = links[steps[i].tree];
    down[i] = l.children;
    for (int c : l.children) next_send.emplace(c, 0);
    ready[i] = l.parent < 0;  // the root's own result
    if (l.parent >= 0) KOLO_RETURN_IF_ERROR(ctx.transport->post_recv(l.parent, at(i), bytes(i), tag, &from_parent[i]));
  }
  cursor[0] = next_of_tree(0, 0);
  cursor[1] = next_of_tree(1, 0);
  for (;;) {
    for (int t = 0; t < 2; ++t) {
      for (size_t& i = cursor[t]; i < n && (ready[i] || from_parent[i].done); i = next_of_tree(t, i + 1)) ready[i] = true;
    }
    KOLO_RETURN_IF_ERROR(post_ready_sends(down));
    if (cursor[0] == n && cursor[1] == n && all_sends_done()) return Status::ok();
    KOLO_RETURN_IF_ERROR(progress());
  }
}

namespace {

bool applies(const Topology& t, const Thresholds& th, const Call& c) {
  return t.size > 1 && c.bytes > 0 && (t.host_count > 1 || is_forced(th, "tree"));
}

void peers(const Topology& t, const Thresholds& th, std::vector<int>* out) {
  if (t.size < 2 || (t.host_count < 2 && !is_forced(th, "tree"))) return;
  for (int p : tree_peers(t.rank, t.size)) add_peer(p, t.rank, out);
}

Status run(const ScheduleContext& ctx, const Topology& t, const AllreduceArgs& a) {
  // The segment the cost model finds best for this size (every rank has
  // the same model, so every rank cuts alike).
  ScheduleContext tuned = ctx;
  if (t.costs) {
    tuned.segment_bytes = tree_segment_bytes(*t.costs, t, a.spans.elements() * dtype_size(a.dtype));
  }
  return allreduce_over_one_buffer(tuned, a, tree_allreduce);
}

double seconds(const Topology& t, const Call& c) { return tree_allreduce_seconds(*t.costs, t, c.bytes); }

}  // namespace

const AllreduceAlgorithm kTreeAllreduce = {"tree", applies, peers, run, seconds};

}  // namespace kolo
