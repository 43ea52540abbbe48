// What creating a communicator settled, from its Config and the
// rendezvous: who this rank is among the others and how it reaches them.
// Kept apart from the Config, which stays what was asked; a sibling
// communicator takes it whole, so it cannot be half-copied, and a split's
// is its parent's subset().
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/rank_facts.h"
#include "runtime/rendezvous.h"
#include "transport/store.h"

namespace kolo {

struct Membership {
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  int machine_ranks = 1;          // ranks sharing this machine's cores (same kernel), whatever the launcher says
  std::vector<bool> same_host;    // rank r is on this node
  std::vector<RankFacts> facts;   // what each rank told at the rendezvous (empty for a world of one)
  int device_local_rank = 0;      // picks this process's GPU: the world's local rank (a split keeps it)
  std::shared_ptr<Rendezvous> rendezvous;  // keeps the store up
  std::shared_ptr<Store> store;   // the rendezvous store; a split's keys are under a prefix of its own
  // That prefix, whole: "" for a world; a split's, shrink's or grow's name
  // after its parent's ("split0.1/shrink0/"). A communicator made from this
  // one keys its store from the rendezvous's own store under path + name,
  // never through `store`, which an abort of this one cancels.
  std::string store_path;
  // Each rank's rank in the world whose store this is (-1: joined by a
  // grow), so that what the store knows of a world rank's process (its
  // departure) can be asked of a rank here.
  std::vector<int> world_ranks;
  std::string job_name;           // Config::job_id, else the master's address
  std::string bind_address;       // Config::bind_address, else the address that reaches the master
  std::string transport = "auto";  // Config::transport: auto (per peer, transport/routes.h), or the one forced
  // "" for a world communicator; for a split, which one and its parent's
  // ranks (errors name ranks in the split's numbering).
  std::string description;

  // Where every rank runs, from `facts`: same_host, the machine's ranks,
  // and the local rank and size (the launcher's where given, >= 0).
  void place(int given_local_rank, int given_local_size);
  // The members (ranks here, in the new order) as a communicator of their
  // own named `name` ("split0.3/"): its store keys under that prefix. The
  // machine's ranks and the GPU stay this one's. This rank must be a member.
  Membership subset(const std::vector<int>& members, const std::string& name) const;
  // The rank here of world rank `world_rank` (world_ranks), or -1.
  int rank_of_world_rank(int world_rank) const;
  int world_rank(int r) const { return world_ranks.empty() ? r : world_ranks[r]; }
  // The rendezvous store's keys under store_path + name.
  std::shared_ptr<Store> store_under(const std::string& name) const;
};

}  // namespace kolo
