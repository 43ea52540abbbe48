#include "transport/routes.h"

#include <algorithm>

#include "common/rank_list.h"

namespace kolo {
namespace {

TransportKind::Peer peer_of(const RankFacts& facts, const TransportKind& kind) {
  auto it = facts.offers.find(kind.name());
  return {facts.host, it == facts.offers.end() ? nullptr : &it->second};
}

}  // namespace

Status choose_routes(const std::vector<RankFacts>& facts, int rank, const std::string& forced, Routes* out) {
  const auto& kinds = transport_kinds();
  const int n = static_cast<int>(facts.size());
  std::map<std::string, int> per_host;
  for (const RankFacts& f : facts) ++per_host[f.host];
  out->kind.assign(n, nullptr);
  std::map<std::pair<size_t, std::string>, std::vector<int>> groups;  // (kind's index, why) -> ranks
  for (int peer = 0; peer < n; ++peer) {
    if (peer == rank) continue;
    std::string why;  // why the earlier kinds could not
    size_t chosen = kinds.size();
    for (size_t k = 0; k < kinds.size(); ++k) {
      const TransportKind& kind = *kinds[k];
      if (kind.carries() != TransportKind::Carries::kHostMemory) continue;
      if (forced != "auto" && forced != kind.name()) continue;
      std::string why_not;
      if (kind.reaches(peer_of(facts[rank], kind), peer_of(facts[peer], kind), per_host[facts[rank].host],
                       &why_not)) {
        chosen = k;
        break;
      }
      if (forced != "auto") {
        return invalid_usage("KOLO_TRANSPORT=" + forced + " cannot reach rank " + std::to_string(peer) + ": " +
                             why_not);
      }
      if (why.find(why_not) == std::string::npos) why += (why.empty() ? "" : "; ") + why_not;
    }
    if (chosen == kinds.size()) {
      return invalid_usage("no transport reaches rank " + std::to_string(peer) + ": " +
                           (why.empty() ? "KOLO_TRANSPORT=" + forced + " is no transport" : why));
    }
    out->kind[peer] = kinds[chosen];
    if (forced != "auto") why = "KOLO_TRANSPORT=" + forced;
    else if (why.empty()) why = kinds[chosen]->shares_memory() ? "same machine" : "preferred";
    groups[{chosen, why}].push_back(peer);
  }
  out->summary.clear();
  out->same_machine_warning.clear();
  const bool first_of_machine =
      std::none_of(facts.begin(), facts.begin() + rank, [&](const RankFacts& f) { return f.host == facts[rank].host; });
  for (const auto& g : groups) {
    const TransportKind* kind = kinds[g.first.first];
    std::vector<int> here;
    for (int peer : g.second) {
      if (facts[peer].host == facts[rank].host) here.push_back(peer);
    }
    if (first_of_machine && forced == "auto" && !kind->shares_memory() && !here.empty() &&
        out->same_machine_warning.empty()) {
      out->same_machine_warning = "rank" + std::string(here.size() > 1 ? "s " : " ") + rank_ranges(here) +
                                  " of this machine" + (here.size() > 1 ? " reach" : " reaches") + " rank " +
                                  std::to_string(rank) + " over " + kind->name() +
                                  ", not shared memory, several times slower: " + g.first.second;
    }
    out->summary += (out->summary.empty() ? "" : "; ") + std::string(kinds[g.first.first]->name()) + " to rank" +
                    (g.second.size() > 1 ? "s " : " ") + rank_ranges(g.second) + " (" + g.first.second + ")";
  }
  return Status::ok();
}

std::vector<const TransportKind*> choose_device_routes(const std::vector<RankFacts>& facts, int rank) {
  std::vector<const TransportKind*> out(facts.size(), nullptr);
  std::map<std::string, int> per_host;
  for (const RankFacts& f : facts) ++per_host[f.host];
  for (size_t peer = 0; peer < facts.size(); ++peer) {
    if (static_cast<int>(peer) == rank) continue;
    for (const TransportKind* kind : transport_kinds()) {
      if (kind->carries() != TransportKind::Carries::kDeviceMemory) continue;
      std::string why_not;
      if (kind->reaches(peer_of(facts[rank], *kind), peer_of(facts[peer], *kind), per_host[facts[rank].host],
                        &why_not)) {
        out[peer] = kind;
        break;
      }
    }
  }
  return out;
}

}  // namespace kolo
