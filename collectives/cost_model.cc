#include "collectives/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "collectives/halving_doubling.h"
#include "collectives/power_of_two_group.h"

namespace kolo {
namespace {

// The link a flat schedule's slowest step crosses: between hosts when there
// are several.
const LinkCost& slowest(const CostModel& m, const Topology& t) { return t.host_count > 1 ? m.remote : m.local; }

double reduce(const CostModel& m, double bytes) { return bytes / m.reduce_bytes_per_s; }

// One step of the L rings across hosts (one per local index) that run at
// once, each moving `piece` bytes: the longer of one message's latency and
// wire time and what the host's link carries for all L.
double cross_step(const CostModel& m, const Topology& t, double piece) {
  return std::max(m.remote.seconds(piece), t.ranks_per_host * piece / m.remote.bytes_per_s);
}

Status bad(const std::string& text, const std::string& part, const char* why) {
  return invalid_argument("KOLO_LINK_COSTS='" + text + "': '" + part + "' " + why +
                          " (use local=LATENCY_US/GBYTES_PER_S,remote=LATENCY_US/GBYTES_PER_S)");
}

}  // namespace

Status parse_link_costs(const std::string& text, CostModel* m) {
  if (text.empty()) return Status::ok();
  for (size_t at = 0; at <= text.size();) {
    const size_t end = std::min(text.find(',', at), text.size());
    const std::string part = text.substr(at, end - at);
    at = end + 1;
    const size_t eq = part.find('='), slash = part.find('/');
    if (eq == std::string::npos || slash == std::string::npos || slash < eq) return bad(text, part, "is not CLASS=US/GBPS");
    const std::string name = part.substr(0, eq);
    LinkCost* link = name == "local" ? &m->local : name == "remote" ? &m->remote : nullptr;
    if (!link) return bad(text, part, "names no class of link: local or remote");
    const std::string us = part.substr(eq + 1, slash - eq - 1), gbps = part.substr(slash + 1);
    char* e1 = nullptr;
    char* e2 = nullptr;
    const double latency_us = std::strtod(us.c_str(), &e1);
    const double gbytes = std::strtod(gbps.c_str(), &e2);
    if (us.empty() || gbps.empty() || *e1 || *e2 || !(latency_us >= 0) || !(gbytes > 0) || !std::isfinite(latency_us) ||
        !std::isfinite(gbytes)) {
      return bad(text, part, "needs a latency >= 0 (microseconds) and a bandwidth > 0 (GB/s)");
    }
    *link = {latency_us * 1e-6, gbytes * 1e9};
    if (name == "local") m->local_class = "configured";
    else m->remote_class = "configured";
  }
  return Status::ok();
}

double ring_allreduce_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  // 2(N - 1) steps of a chunk each, N - 1 of them reducing it. Ranks are
  // placed in blocks, so a host's network link carries one ring crossing
  // each way, and H of the ring's N hops cross hosts. The steps pipeline:
  // the time is the longer of the chain of hops a chunk takes (their
  // latencies and wire times, hop by hop) and what the slowest link must
  // carry.
  const int n = t.size;
  if (n < 2) return 0;
  const double chunk = double(bytes) / n;
  const double crossing = t.host_count > 1 ? double(t.host_count) / n : 0;
  const double hop = crossing * m.remote.seconds(chunk) + (1 - crossing) * m.local.seconds(chunk);
  const double load = chunk / slowest(m, t).bytes_per_s;
  return 2.0 * (n - 1) * std::max(hop, load) + (n - 1) * reduce(m, chunk);
}

double ring_reduce_scatter_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  const int n = t.size;
  if (n < 2) return 0;
  const double chunk = double(bytes) / n;
  return (n - 1) * (slowest(m, t).seconds(chunk) + reduce(m, chunk));
}

double ring_allgather_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  const int n = t.size;
  if (n < 2) return 0;
  return (n - 1) * slowest(m, t).seconds(double(bytes) / n);
}

double recursive_doubling_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  // log2(p) exchanges of the whole buffer at distances 1, 2, 4, ...; those
  // at a distance of a host's ranks or more cross hosts, all of a host's
  // ranks at once over its one link. Past a power of two, a hand-off in
  // and one out.
  const int n = t.size;
  if (n < 2) return 0;
  const int p = PowerOfTwoGroup(n).size;
  const double b = double(bytes);
  double s = 0;
  for (int d = 1; d < p; d *= 2) {
    const bool crosses = t.host_count > 1 && d >= t.ranks_per_host;
    const LinkCost& link = crosses ? m.remote : m.local;
    s += link.latency_s + b * (crosses ? t.ranks_per_host : 1) / link.bytes_per_s + reduce(m, b);
  }
  if (p != n) s += 2 * (slowest(m, t).seconds(b)) + reduce(m, b);
  return s;
}

double halving_doubling_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  // Per block (halving_doubling.h), log2(p) exchanges that halve what each
  // pair holds, each reducing what arrives, then as many that double it
  // back; the first ones, at the nearest distances, move the largest
  // pieces. Those at a distance of a host's ranks or more cross hosts, all
  // of a host's ranks at once over its one link. Past a power of two, the
  // whole block in and out of the folded ranks first and last, as
  // recursive doubling's.
  const int n = t.size;
  if (n < 2) return 0;
  const int p = PowerOfTwoGroup(n).size;
  const double block_bytes = double(halving_doubling_block_bytes(t, m.segment_bytes, m.cache_bytes));
  const double blocks = std::max(1.0, std::ceil(double(bytes) / block_bytes));
  const double block = double(bytes) / blocks;
  double piece = block, s = 0;
  for (int d = 1; d < p; d *= 2) {
    piece /= 2;
    const bool crosses = t.host_count > 1 && d >= t.ranks_per_host;
    const LinkCost& link = crosses ? m.remote : m.local;
    s += 2 * (link.latency_s + piece * (crosses ? t.ranks_per_host : 1) / link.bytes_per_s) + reduce(m, piece);
  }
  if (p != n) s += 2 * (slowest(m, t).seconds(block)) + reduce(m, block);
  return blocks * s;
}

double arena_allreduce_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  // One ring hop to agree on the call and two barriers (a flag each rank
  // writes and all read: about two hops each). Each rank writes its buffer
  // into its slot, reduces its 1/N share reading the N - 1 others' slots
  // in place, and reads the others' shares out: 2(N - 1)/N of the buffer
  // through memory as the ring, with the reduction fused into the reads
  // and none of the ring's 2(N - 1) steps or its copies through the
  // transport's queues.
  const int n = t.size;
  return 5 * m.local.latency_s + 2.0 * (n - 1) / n * double(bytes) / m.local.bytes_per_s;
}

double single_copy_allreduce_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  // As the arena's (a post each rank reads, two barriers), but each byte
  // that crosses between ranks is copied once, straight out of the peer's
  // memory, where through the slots it is copied in and out: (N - 1)/N of
  // the buffer into the reduction and as much out, each a copy, which
  // takes half a message's time per byte (as the one-shot's). Its system
  // calls wait for no peer. Where the caches make the slots faster after
  // all, rank 0's calls find out and choose them (single_copy_allreduce.h).
  const int n = t.size;
  return 5 * m.local.latency_s + 1.0 * (n - 1) / n * double(bytes) / m.local.bytes_per_s;
}

double one_shot_allreduce_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  // One flag each rank writes and all read (a hop), the buffer copied into
  // the rank's mailbox, and N - 1 reductions that each read a peer's
  // mailbox in place; a copy through memory, in or out, takes half a
  // message's time per byte (as the arena's). Against recursive doubling:
  // one hop instead of log2(N), for N/2 of the buffer's copies instead of
  // one per hop.
  const int n = t.size;
  const double b = double(bytes);
  return m.local.latency_s + 0.5 * n * b / m.local.bytes_per_s + (n - 1) * reduce(m, b);
}

double hierarchical_allreduce_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  // Reduce-scatter among a host's L ranks, an allreduce of each 1/L slice
  // among the H hosts (all L slices at once over the host's link), an
  // allgather within the host.
  const int l = t.ranks_per_host, h = t.host_count;
  const double b = double(bytes), slice = b / l, piece = slice / h;
  const double local = m.host_arenas ? arena_reduce_scatter_seconds(m, t, bytes) + arena_allgather_seconds(m, t, bytes)
                                     : (l - 1) * (2 * m.local.seconds(slice) + reduce(m, slice));
  const double cross = 2.0 * (h - 1) * cross_step(m, t, piece) + (h - 1) * reduce(m, piece);
  return local + cross;
}

double hierarchical_reduce_scatter_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  const int l = t.ranks_per_host, h = t.host_count;
  const double b = double(bytes), piece = b / l / h;
  const double local =
      m.host_arenas ? arena_reduce_scatter_seconds(m, t, bytes) : (l - 1) * (m.local.seconds(b / l) + reduce(m, b / l));
  const double cross = (h - 1) * (cross_step(m, t, piece) + reduce(m, piece));
  return local + cross;
}

double hierarchical_allgather_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  const int l = t.ranks_per_host, h = t.host_count;
  const double b = double(bytes), piece = b / l / h;
  const double local = m.host_arenas ? arena_allgather_seconds(m, t, bytes) : (l - 1) * m.local.seconds(b / l);
  return (h - 1) * cross_step(m, t, piece) + local;
}

double chain_seconds(const CostModel& m, const Topology& t, size_t through_root, bool reduces) {
  // N - 1 hops, each forwarding a segment as soon as it has it: the
  // root's link carries it all, and the last segment arrives N - 2 hops
  // after it leaves.
  const int n = t.size;
  if (n < 2) return 0;
  const double v = double(through_root);
  const double s = std::min(v, double(std::max<size_t>(m.segment_bytes, 1)));
  const LinkCost& link = slowest(m, t);
  return (n - 1) * link.latency_s + v / link.bytes_per_s + (n - 2) * s / link.bytes_per_s +
         (reduces ? reduce(m, v) : 0);
}

// One ring hop to agree on the call and a barrier (about two hops).
double arena_sync(const CostModel& m) { return 3 * m.local.latency_s; }

double arena_allgather_seconds(const CostModel& m, const Topology&, size_t bytes) {
  // Each rank copies its block in and the others' out: the result once.
  return arena_sync(m) + double(bytes) / (2 * m.local.bytes_per_s);
}

double arena_reduce_scatter_seconds(const CostModel& m, const Topology&, size_t bytes) {
  // Each rank copies its input in, then reads its block from every slot.
  return arena_sync(m) + double(bytes) / m.local.bytes_per_s;
}

double arena_broadcast_seconds(const CostModel& m, const Topology&, size_t bytes) {
  // The root copies the buffer in, then every other rank copies it out.
  return arena_sync(m) + double(bytes) / m.local.bytes_per_s;
}

double pairwise_alltoall_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  // Every block posted at once: one latency, then each link's share. A
  // host's link carries its L ranks' blocks for the other hosts' ranks.
  const int n = t.size, l = t.ranks_per_host;
  if (n < 2) return 0;
  const double block = double(bytes) / n;
  const double local = (std::min(l, n) - 1) * block / m.local.bytes_per_s;
  if (t.host_count < 2) return m.local.latency_s + local;
  const double remote = double(n - l) * l * block / m.remote.bytes_per_s;
  return m.remote.latency_s + std::max(local, remote);
}

size_t tree_segment_bytes(const CostModel& m, const Topology& t, size_t bytes) {
  // T(S) = (D - 1 + S)(a + 2H/(S b)) is least at S = sqrt(2H(D - 1)/(a b)).
  const double half = double(bytes) / 2;
  const LinkCost& link = slowest(m, t);
  const double depth = std::max(1, m.tree_depth);
  const double best = std::sqrt(2 * half * (depth - 1) / std::max(link.latency_s * link.bytes_per_s, 1.0));
  const double segments = std::max(1.0, std::floor(best));
  const double floor_bytes = 16 << 10;  // below this, per-message costs the model leaves out dominate
  const double s = std::max(std::min(half / segments, double(m.segment_bytes)), std::min(floor_bytes, half));
  return std::max<size_t>(1, static_cast<size_t>(s));
}

double tree_allreduce_seconds(const CostModel& m, const Topology& t, size_t bytes) {
  // Each tree carries half the buffer in S segments of s bytes; a step
  // (one segment of each tree) takes a rank two segments in and two out
  // (inner node of one tree, leaf of the other) and a host's network link
  // the tree edges that leave it (tree_host_load), and the pipeline fills
  // in `depth` steps. Up, then down.
  if (t.size < 2) return 0;
  const double half = double(bytes) / 2;
  const double segments = std::max(1.0, std::ceil(half / double(tree_segment_bytes(m, t, bytes))));
  const double s = half / segments;
  const double steps = m.tree_depth + segments - 1;
  double wire = 2 * s / m.local.bytes_per_s;
  double latency = m.local.latency_s;
  if (t.host_count > 1) {
    wire = std::max(wire, m.tree_host_load * s / m.remote.bytes_per_s);
    latency = m.remote.latency_s;
  }
  const double up = steps * (latency + wire + reduce(m, 2 * s));
  const double down = steps * (latency + wire);
  return up + down;
}

}  // namespace kolo
