// A communicator's changes of membership: shrink (the survivors of lost or
// stuck ranks go on without them) and grow (new ranks join, as a replaced
// machine rejoins). Each makes a new communicator, as split does: its own
// store keys (under the rendezvous store's own, never the old
// communicator's, which an abort cancels), connections and failure record.
#include <algorithm>
#include <sstream>

#include "collectives/fingerprint.h"
#include "common/log.h"
#include "common/rank_list.h"
#include "runtime/communicator.h"
#include "runtime/shrink_agreement.h"
#include "runtime/store_server.h"

namespace kolo {
namespace {

// Where the survivors of a shrink agree: the job's store, unless its host
// is excluded or does not answer a short look (it died, or is stuck), and
// then the standby store of the lowest surviving rank (rendezvous.h). The
// survivors decide alike: by the caller's list, which they share, and by
// the host's state, which they all see (a dead host's connections are
// closed to all of them; a stuck one answers none). A host found lost is
// excluded too: it cannot be a member of what the survivors make.
Status choose_agreement_store(const Membership& m, std::vector<bool>* excluded, double look_s, Deadline deadline,
                              std::shared_ptr<Rendezvous>* out) {
  *out = m.rendezvous;
  if (!m.rendezvous || m.rendezvous->host_rank() < 0) return Status::ok();  // no rank serves the store
  const int host = m.rank_of_world_rank(m.rendezvous->host_rank());
  const std::string host_named = host >= 0 ? "rank " + std::to_string(host)
                                           : "world rank " + std::to_string(m.rendezvous->host_rank());
  std::string why;
  if (host >= 0 && (*excluded)[host]) {
    why = host_named + ", which serves the rendezvous store, is excluded";
  } else {
    Status up = m.rendezvous->check_store(Deadline::after_seconds(look_s));
    if (up.is_ok()) return Status::ok();
    why = "the rendezvous store's host (" + host_named + ") is lost: " + up.message();
    if (host >= 0 && host != m.rank) (*excluded)[host] = true;
  }
  int successor = 0;
  while ((*excluded)[successor]) ++successor;  // this rank is not excluded: there is one
  const std::string address = m.facts.empty() ? "" : m.facts[successor].standby_store;
  if (address.empty()) {
    return peer_lost(why + "; rank " + std::to_string(successor) + ", the first survivor, has no standby store");
  }
  KOLO_INFO(why << "; the survivors agree on rank " << successor << "'s standby store at " << address);
  Status s = m.rendezvous->fail_over(m.world_rank(successor), address, m.world_rank(m.rank), deadline, out);
  return s.is_ok() ? s
                   : s.with_context(why + "; reaching rank " + std::to_string(successor) +
                                    "'s standby store, which the survivors move to");
}

}  // namespace

Status Communicator::shrink(const std::vector<int>& exclude, int flags, std::unique_ptr<Communicator>* out) {
  *out = nullptr;
  if (flags & ~(kShrinkAbort | kShrinkDropUnresponsive)) {
    return invalid_argument("shrink flags " + std::to_string(flags) + " include unknown bits (known: " +
                            std::to_string(kShrinkAbort) + " abort, " + std::to_string(kShrinkDropUnresponsive) +
                            " drop unresponsive)");
  }
  std::vector<bool> excluded(world_.size, false);
  for (int r : exclude) {
    if (r < 0 || r >= world_.size) {
      return invalid_argument("exclude names rank " + std::to_string(r) + ", which is not a rank of this communicator"
                              " of " + std::to_string(world_.size));
    }
    excluded[r] = true;
  }
  if (excluded[world_.rank]) {
    return invalid_argument("rank " + std::to_string(world_.rank) +
                            " excludes itself: only the ranks that stay call shrink");
  }
  if (flags & kShrinkAbort) revoke();
  const std::string name = "shrink" + std::to_string(shrinks_++) + "/";
  const std::string context = "shrink on rank " + std::to_string(world_.rank) + world_.description;
  const Deadline deadline = Deadline::after_seconds(config_.timeout_s);
  std::shared_ptr<Rendezvous> rendezvous;
  Status s = choose_agreement_store(world_, &excluded, std::min(1.0, config_.timeout_s / 4), deadline, &rendezvous);
  if (!s.is_ok()) return s.with_context(context);
  ShrinkRequest request;
  request.rank = world_.rank;
  request.size = world_.size;
  request.excluded = excluded;
  request.drop_unresponsive = (flags & kShrinkDropUnresponsive) != 0;
  request.deadline = deadline;
  request.store_timeout_s = config_.timeout_s;
  // The store's server marks a world rank whose connection closed.
  std::shared_ptr<Store> base(rendezvous, rendezvous->store());
  request.departed = [this, base](int r) {
    const int world_rank = world_.world_rank(r);
    std::string unused;
    return world_rank >= 0 && base->get_one(departed_key(world_rank), Deadline::after_seconds(0), &unused).is_ok();
  };
  std::vector<int> members;
  s = agree_on_members(std::make_shared<PrefixStore>(base, world_.store_path + name).get(), request, &members);
  if (!s.is_ok()) return s.with_context(context);
  std::unique_ptr<Communicator> c(new Communicator(config_));
  c->world_ = world_.subset(members, name);
  c->world_.rendezvous = rendezvous;  // the store may have moved (choose_agreement_store)
  c->world_.store = c->world_.store_under("");
  KOLO_RETURN_IF_ERROR(c->bring_up("", /*full_mesh=*/false, {}));
  std::vector<int> gone;
  for (int r = 0; r < world_.size; ++r) {
    if (!std::binary_search(members.begin(), members.end(), r)) gone.push_back(r);
  }
  KOLO_INFO("shrink" << world_.description << ": rank " << world_.rank << " is rank " << c->world_.rank << " of "
                     << c->world_.size << (gone.empty() ? "" : ", without " + ranks_named(gone, 16)));
  *out = std::move(c);
  return Status::ok();
}

Communicator::GrowPlace Communicator::next_grow() const {
  const std::string name = "grow" + std::to_string(grows_);
  return GrowPlace{world_.store_path + name + "/", world_.job_name + "/" + name};
}

namespace {

// "<new size> <old size> <store's world rank> <world ranks>", as the ranks
// already there see it: a joining rank learns the shape it must fit, and
// what a shrink needs to follow the store should its rank be lost (which
// world rank serves it, and each rank's world rank, for its departure).
constexpr char kShapeKey[] = "shape";

struct GrowShape {
  int new_size = 0;
  int old_size = 0;
  int store_host = -1;
  std::vector<int> world_ranks;  // the old ranks'
};

std::string encode_shape(const GrowShape& g) {
  std::string text = std::to_string(g.new_size) + " " + std::to_string(g.old_size) + " " +
                     std::to_string(g.store_host) + " ";
  for (size_t i = 0; i < g.world_ranks.size(); ++i) text += (i ? "," : "") + std::to_string(g.world_ranks[i]);
  return text;
}

Status decode_shape(const std::string& text, GrowShape* g) {
  std::istringstream in(text);
  std::string list;
  if (!(in >> g->new_size >> g->old_size >> g->store_host >> list) || g->old_size < 1 ||
      g->new_size <= g->old_size) {
    return internal_error("the grow's shape '" + text.substr(0, 64) + "' in the store is damaged");
  }
  g->world_ranks.clear();
  std::istringstream ranks(list);
  std::string one;
  while (std::getline(ranks, one, ',')) g->world_ranks.push_back(std::atoi(one.c_str()));
  if (static_cast<int>(g->world_ranks.size()) != g->old_size) {
    return internal_error("the grow's shape '" + text.substr(0, 64) + "' in the store is damaged");
  }
  return Status::ok();
}

}  // namespace

Status Communicator::grow(int new_size, std::unique_ptr<Communicator>* out) {
  *out = nullptr;
  if (new_size <= world_.size) {
    return invalid_argument("grow to " + std::to_string(new_size) + " ranks: the communicator has " +
                            std::to_string(world_.size) + " already");
  }
  KOLO_RETURN_IF_ERROR(check_healthy());
  const GrowPlace place = next_grow();
  const std::string name = "grow" + std::to_string(grows_++) + "/";
  std::unique_ptr<Communicator> c(new Communicator(config_));
  Membership& m = c->world_;
  m = world_;  // rendezvous, bind address, transport, the GPU
  m.size = new_size;
  m.store = world_.store_under(name);
  m.store_path = place.store_path;
  m.job_name = place.job_name;
  m.description = " of " + name.substr(0, name.size() - 1) + " (grown from " + std::to_string(world_.size) + " ranks)";
  GrowShape grow_shape;
  grow_shape.new_size = new_size;
  grow_shape.old_size = world_.size;
  grow_shape.store_host = world_.rendezvous ? world_.rendezvous->host_rank() : -1;
  for (int r = 0; r < world_.size; ++r) grow_shape.world_ranks.push_back(world_.world_rank(r));
  m.world_ranks = grow_shape.world_ranks;  // the joining ranks have none
  m.world_ranks.resize(new_size, -1);
  const std::string shape = encode_shape(grow_shape);
  std::string agreed;
  KOLO_RETURN_IF_ERROR(m.store->set_if_absent(kShapeKey, shape, Deadline::after_seconds(config_.timeout_s), &agreed));
  if (agreed != shape) {
    return mismatch("rank " + std::to_string(world_.rank) + " grows to " + std::to_string(new_size) +
                    " ranks, another rank to " + agreed.substr(0, agreed.find(' ')));
  }
  RankFacts mine;
  if (!world_.facts.empty()) {
    mine = world_.facts[world_.rank];
  } else {  // a world of one never met anyone: what its transports offer
    std::vector<std::unique_ptr<DirectTransport>> unused;
    KOLO_RETURN_IF_ERROR(offer(config_, m, &mine, &unused));
  }
  KOLO_RETURN_IF_ERROR(exchange_facts(config_, mine, &m));
  const int machine_ranks = m.machine_ranks;
  m.place(-1, -1);
  m.machine_ranks = std::max(machine_ranks, m.machine_ranks);
  KOLO_RETURN_IF_ERROR(c->bring_up("", /*full_mesh=*/false, {}));
  KOLO_INFO("grow: rank " << world_.rank << " of " << new_size << " (was " << world_.size << ")");
  *out = std::move(c);
  return Status::ok();
}

Status Communicator::join_grown(std::shared_ptr<Rendezvous> rendezvous, const GrowPlace& place, int rank, int size,
                                const Config& config, std::unique_ptr<Communicator>* out) {
  *out = nullptr;
  if (size < 2 || rank < 0 || rank >= size) {
    return invalid_argument("rank " + std::to_string(rank) + " of a grown size " + std::to_string(size) +
                            " is impossible");
  }
  std::unique_ptr<Communicator> c(new Communicator(config));
  Membership& m = c->world_;
  m.rank = rank;
  m.size = size;
  m.rendezvous = rendezvous;
  m.store_path = place.store_path;
  m.store = std::make_shared<PrefixStore>(std::shared_ptr<Store>(rendezvous, rendezvous->store()), place.store_path);
  m.job_name = place.job_name;
  m.bind_address = config.bind_address.empty() ? rendezvous->local_address() : config.bind_address;
  if (m.bind_address.empty()) m.bind_address = "127.0.0.1";
  m.transport = config.transport;
  m.description = " of the communicator it joins";
  install_fingerprint_describer();
  set_log_prefix("rank " + std::to_string(rank));
  // The ranks already there say the shape; a joining rank must fit it.
  std::string shape;
  Status s = m.store->get_one(kShapeKey, Deadline::after_seconds(config.timeout_s), &shape);
  if (s.code() == Code::kTimeout) {
    return timeout_error("rank " + std::to_string(rank) + " joining a grow: the communicator's ranks did not call "
                         "grow within KOLO_TIMEOUT_S=" + std::to_string(config.timeout_s) + " s");
  }
  KOLO_RETURN_IF_ERROR(s);
  GrowShape grown;
  KOLO_RETURN_IF_ERROR(decode_shape(shape, &grown));
  const int new_size = grown.new_size;
  const int old_size = grown.old_size;
  if (new_size != size) {
    return mismatch("rank " + std::to_string(rank) + " joins a grow to " + std::to_string(size) +
                    " ranks, but the communicator's ranks grow it to " + std::to_string(new_size));
  }
  if (rank < old_size) {
    return invalid_argument("rank " + std::to_string(rank) + " is taken: the communicator already has ranks 0-" +
                            std::to_string(old_size - 1) + ", so joining ranks are " + std::to_string(old_size) +
                            "-" + std::to_string(size - 1));
  }
  // The ranks already there keep their world numbers (for what the store
  // knows of their processes); joining ranks have none (-1).
  m.world_ranks = grown.world_ranks;
  m.world_ranks.resize(size, -1);
  rendezvous->learn_store_host(grown.store_host);
  std::vector<std::unique_ptr<DirectTransport>> opened;
  KOLO_RETURN_IF_ERROR(meet(config, -1, -1, &m, &opened));
  KOLO_RETURN_IF_ERROR(c->bring_up("", /*full_mesh=*/false, std::move(opened)));
  KOLO_INFO("joined a grown communicator: rank " << rank << " of " << size);
  *out = std::move(c);
  return Status::ok();
}

}  // namespace kolo
