#include "runtime/membership.h"

#include "common/rank_list.h"

namespace kolo {

void Membership::place(int given_local_rank, int given_local_size) {
  if (facts.empty()) {  // a world of one
    same_host.assign(size, true);
    local_rank = 0;
    local_size = 1;
    return;
  }
  const std::string& mine = facts[rank].host;
  const auto kernel = [](const std::string& host) { return host.substr(host.rfind('/') + 1); };
  int lr = 0, ls = 0, machine = 0;
  same_host.assign(size, false);
  for (int r = 0; r < size; ++r) {
    if (facts[r].host == mine) {
      same_host[r] = true;
      if (r < rank) ++lr;
      ++ls;
    }
    if (kernel(facts[r].host) == kernel(mine)) ++machine;
  }
  machine_ranks = machine;
  local_rank = given_local_rank >= 0 ? given_local_rank : lr;
  local_size = given_local_size >= 0 ? given_local_size : ls;
}

Membership Membership::subset(const std::vector<int>& members, const std::string& name) const {
  Membership m = *this;  // bind address, settled transport, rendezvous, machine ranks, device_local_rank
  m.size = static_cast<int>(members.size());
  m.facts.clear();
  for (size_t i = 0; i < members.size(); ++i) {
    if (members[i] == rank) m.rank = static_cast<int>(i);
    if (!facts.empty()) m.facts.push_back(facts[members[i]]);
  }
  const int machine = machine_ranks;
  m.place(-1, -1);
  m.machine_ranks = machine;  // the cores are shared with the whole machine, whatever the split
  m.world_ranks.clear();
  for (int member : members) m.world_ranks.push_back(world_rank(member));
  m.store = store_under(name);
  m.store_path = store_path + name;
  m.job_name = job_name + "/" + name;
  m.description = " of " + name.substr(0, name.size() - 1) + " (whose ranks are ranks " + rank_list(members, 16) +
                  " of its parent)";
  return m;
}

int Membership::rank_of_world_rank(int world_rank_wanted) const {
  if (world_rank_wanted < 0) return -1;
  for (int r = 0; r < size; ++r) {
    if (world_rank(r) == world_rank_wanted) return r;
  }
  return -1;
}

std::shared_ptr<Store> Membership::store_under(const std::string& name) const {
  return std::make_shared<PrefixStore>(std::shared_ptr<Store>(rendezvous, rendezvous->store()), store_path + name);
}

}  // namespace kolo
