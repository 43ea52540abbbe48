#include "runtime/tuning.h"

#include <algorithm>
#include <map>

#include "collectives/pipeline.h"
#include "collectives/tree_schedule.h"

namespace kolo {

Pacing choose_pacing(const Config& config, int machine_ranks, int cores, size_t l2_bytes) {
  const bool own_core = machine_ranks <= cores;
  Pacing p;
  p.spin_us = config.spin_us >= 0 ? static_cast<int>(config.spin_us) : own_core ? 2000 : 50;
  p.yield = config.spin_yield >= 0 ? config.spin_yield != 0 : !own_core;
  p.segment_bytes = pipeline_segment_bytes(config.segment_bytes, own_core, l2_bytes);
  p.cache_bytes = pipeline_cache_bytes(l2_bytes);
  return p;
}

CostShape choose_costs(const Config& config, const std::vector<RankFacts>& facts, const std::string& transport,
                       const Pacing& pacing) {
  CostShape shape;
  const int size = std::max(1, static_cast<int>(facts.size()));
  shape.costs.segment_bytes = pacing.segment_bytes;
  shape.costs.cache_bytes = pacing.cache_bytes;
  shape.costs.tree_depth = double_tree_depth(size);
  if (facts.size() < 2) return shape;
  std::map<std::string, std::vector<int>> ranks_of_host;
  for (int r = 0; r < static_cast<int>(facts.size()); ++r) ranks_of_host[facts[r].host].push_back(r);
  shape.host_count = static_cast<int>(ranks_of_host.size());
  for (const auto& [host, ranks] : ranks_of_host) {
    shape.ranks_per_host = std::max(shape.ranks_per_host, static_cast<int>(ranks.size()));
  }
  shape.costs.tree_host_load = double_tree_host_load(size, shape.ranks_per_host);
  // Of the kinds each host's first rank takes, the slowest at a megabyte.
  const TransportKind* local = nullptr;
  const TransportKind* remote = nullptr;
  const auto keep_slower = [](const TransportKind*& slot, const TransportKind* kind, bool same_host) {
    if (!slot || kind->link_cost(same_host).seconds(1 << 20) > slot->link_cost(same_host).seconds(1 << 20)) {
      slot = kind;
    }
  };
  for (const auto& [host, ranks] : ranks_of_host) {
    Routes routes;
    if (!choose_routes(facts, ranks[0], transport, &routes).is_ok()) continue;
    for (int peer = 0; peer < static_cast<int>(routes.kind.size()); ++peer) {
      if (peer == ranks[0] || !routes.kind[peer]) continue;
      const bool same_host = facts[peer].host == host;
      keep_slower(same_host ? local : remote, routes.kind[peer], same_host);
    }
  }
  CostModel& costs = shape.costs;
  costs.host_arenas = shape.host_count > 1 && local && local->shares_memory();
  // A link no rank takes (one rank per host, one host) is priced all the
  // same, as the model's default kinds (shm, tcp) would carry it.
  if (!local) local = find_transport_kind(costs.local_class);
  if (!remote) remote = find_transport_kind(costs.remote_class);
  if (local) {
    costs.local_class = local->name();
    costs.local = local->link_cost(true);
  }
  if (remote) {
    costs.remote_class = remote->name();
    costs.remote = remote->link_cost(false);
  }
  // Checked when the configuration was read.
  if (!config.link_costs.empty()) (void)parse_link_costs(config.link_costs, &costs);
  return shape;
}

std::unique_ptr<HostLayout> choose_host_layout(const Config& config, const std::vector<RankFacts>& facts, int rank,
                                               bool* hierarchical_refused) {
  *hierarchical_refused = false;
  if (config.algorithm == "ring" || facts.size() < 2) return nullptr;
  std::vector<std::string> host_of_rank;
  for (const RankFacts& f : facts) host_of_rank.push_back(f.host);
  auto layout = std::make_unique<HostLayout>();
  if (make_host_layout(host_of_rank, rank, layout.get())) return layout;
  *hierarchical_refused = config.algorithm == "hierarchical";
  return nullptr;
}

}  // namespace kolo
