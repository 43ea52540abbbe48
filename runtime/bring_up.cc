#include "runtime/bring_up.h"

#include <algorithm>
#include <cctype>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <thread>

#include "collectives/algorithms.h"
#include "common/cpu_caches.h"
#include "common/log.h"
#include "transport/per_peer_transport.h"
#include "transport/routes.h"

namespace kolo {
namespace {

// The kinds that may offer an arena: the one kind that reaches every peer,
// if one does; and the one that reaches every other rank of this host.
struct ArenaKinds {
  const TransportKind* all = nullptr;
  const TransportKind* host = nullptr;
};

// The transport to each peer (transport/routes.h): one of them, or a
// PerPeerTransport over several. opened_early: see meet.
Status make_transport(const Config& config, const Membership& world, const std::string& store_prefix,
                      std::vector<std::unique_ptr<DirectTransport>> opened_early, Wiring* out, ArenaKinds* arena_kinds) {
  Routes routes;
  KOLO_RETURN_IF_ERROR(choose_routes(world.facts, world.rank, world.transport, &routes));
  const TransportContext context = transport_context(config, world, store_prefix);
  // Each kind of transport in use opened once, in order of preference (or
  // taken from what its offer opened); every peer routed to its own.
  const auto& kinds = transport_kinds();
  std::vector<std::unique_ptr<DirectTransport>> opened;
  std::vector<int> routed(world.size, 0);
  opened_early.resize(kinds.size());
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (std::find(routes.kind.begin(), routes.kind.end(), kinds[k]) == routes.kind.end()) continue;
    std::unique_ptr<DirectTransport> t = std::move(opened_early[k]);
    if (!t) KOLO_RETURN_IF_ERROR(kinds[k]->open(context, &t));
    for (int peer = 0; peer < world.size; ++peer) {
      if (routes.kind[peer] == kinds[k]) routed[peer] = static_cast<int>(opened.size());
    }
    opened.push_back(std::move(t));
  }
  // The shared arena needs every peer reached through memory, by one kind;
  // a host's arena, every other rank of the host.
  arena_kinds->all = opened.size() == 1 ? routes.kind[world.rank == 0 ? 1 : 0] : nullptr;
  bool one_kind = true;
  for (int peer = 0; peer < world.size; ++peer) {
    if (peer == world.rank || world.facts[peer].host != world.facts[world.rank].host) continue;
    if (arena_kinds->host && routes.kind[peer] != arena_kinds->host) one_kind = false;
    arena_kinds->host = routes.kind[peer];
  }
  if (!one_kind) arena_kinds->host = nullptr;
  // Said once per process, for the first communicator (the world).
  static std::once_flag told;
  std::call_once(told, [&] {
    KOLO_INFO("transports: " << routes.summary);
    if (!routes.same_machine_warning.empty()) KOLO_WARN(routes.same_machine_warning);
  });
  KOLO_DEBUG("transports" << world.description << ": " << routes.summary);
  if (opened.size() == 1) {
    out->transport = std::move(opened[0]);
  } else {
    std::unique_ptr<PerPeerTransport> per_peer;
    KOLO_RETURN_IF_ERROR(PerPeerTransport::create(std::move(opened), std::move(routed), &per_peer));
    out->transport = std::move(per_peer);
  }
  return Status::ok();
}

Pacing pacing_here(const Config& config, const Membership& world) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const Pacing pacing = choose_pacing(config, world.machine_ranks, cores, cpu_caches().l2);
  KOLO_DEBUG("polling: spin " << pacing.spin_us << " us, yield " << pacing.yield << "; segment "
                              << pacing.segment_bytes << " bytes (" << world.machine_ranks << " rank(s) on " << cores
                              << " core(s))");
  return pacing;
}

void choose_hosts(const Config& config, const Membership& world, Wiring* out) {
  out->shape = choose_costs(config, world.facts, world.transport, out->pacing);
  bool hierarchical_refused = false;
  out->hosts = choose_host_layout(config, world.facts, world.rank, &hierarchical_refused);
  if (hierarchical_refused) {
    static std::once_flag told;
    std::call_once(told, [] {
      KOLO_WARN("KOLO_ALGORITHM=hierarchical needs ranks on several hosts, the same number (two or more) on "
                "each; using the others");
    });
  }
  if (out->hosts) {
    KOLO_DEBUG("hierarchical allreduce: local ranks " << out->hosts->local.size() << ", hosts "
                                                      << out->hosts->cross.size());
  }
}

// Every peer an algorithm may exchange with (or every peer, for a full
// mesh), connected now: a connection made lazily inside a collective could
// leave a rank waiting for a peer that has already failed, with no socket
// to tell it so. Any order works: the accepting side's listener takes
// connections in the background, whatever this rank is doing.
Status connect(const Config& config, const Thresholds& thresholds, const Membership& world, bool full_mesh,
               Wiring* w) {
  if (full_mesh) return connect_every_pair(config, world, w->transport.get());
  return connect_peers(w->transport.get(), algorithm_peers(topology_of(*w, world, thresholds, nullptr), thresholds),
                       config.timeout_s);
}

// An arena of `kind` among `context`'s ranks. UNSUPPORTED (no room in
// /dev/shm, ...) is no failure: the arena's ranks learn it alike, keep what
// they would use `instead`, *out stays empty, and `told` warns once.
Status open_arena_of(const Config& config, const Pacing& pacing, const TransportKind* kind,
                     const TransportContext& context, std::once_flag& told, const char* instead,
                     std::unique_ptr<SharedArena>* out) {
  Status s = kind->open_arena(context, pacing.spin_us, pacing.yield, Deadline::after_seconds(config.timeout_s), out);
  if (s.code() != Code::kUnsupported) return s;
  std::call_once(told, [&] { KOLO_WARN(s.message() << "; " << instead); });
  out->reset();
  return Status::ok();
}

// Maps the arena where every rank is reached over shared memory, else the
// host's arena where this host's ranks are (collective). Made whatever this
// rank's KOLO_ALGORITHM, which may differ from another's: the decision must
// be the same on every rank (topology_of leaves the arena out for
// KOLO_ALGORITHM=ring).
Status open_arenas(const Config& config, const Membership& world, const std::string& store_prefix,
                   const ArenaKinds& kinds, Wiring* w) {
  if (kinds.all && kinds.all->shares_memory()) {
    static std::once_flag told;
    return open_arena_of(config, w->pacing, kinds.all, transport_context(config, world, store_prefix), told,
                         "allreduce takes the ring instead", &w->arena);
  }
  // The hierarchical schedules' phases within a host go through an arena
  // among the host's ranks, where the ranks span several hosts with two or
  // more on each (make_host_layout) and one kind that maps memory reaches
  // every other rank of the host. The facts and the routes decide, alike on
  // every rank of the host; never KOLO_ALGORITHM, which may differ between
  // ranks (a rank waiting for an arena its host's first rank never made
  // would wait out the deadline).
  if (!kinds.host || !kinds.host->shares_memory()) return Status::ok();
  std::vector<std::string> host_of_rank;
  for (const RankFacts& f : world.facts) host_of_rank.push_back(f.host);
  HostLayout layout;
  if (!make_host_layout(host_of_rank, world.rank, &layout)) return Status::ok();
  // Named after the host's first rank: emulated hosts share one /dev/shm.
  TransportContext context =
      transport_context(config, world, store_prefix + "host" + std::to_string(layout.local.front()) + "/");
  context.rank = layout.local_index;
  context.size = static_cast<int>(layout.local.size());
  static std::once_flag told;
  return open_arena_of(config, w->pacing, kinds.host, context, told,
                       "within a host the hierarchical schedules take the ring", &w->host_arena);
}

}  // namespace

TransportContext transport_context(const Config& config, const Membership& world, const std::string& store_prefix) {
  TransportContext context;
  context.store = world.store.get();
  context.rank = world.rank;
  context.size = world.size;
  // 1 until the ranks have met (offers are made before anyone is placed).
  context.ranks_on_host =
      std::max(1, static_cast<int>(std::count(world.same_host.begin(), world.same_host.end(), true)));
  context.store_prefix = store_prefix;
  context.job_name = world.job_name;
  context.bind_address = world.bind_address;
  context.timeout_s = config.timeout_s;
  context.settings = setting_values(config);
  return context;
}

// What each kind of transport offers here (transport/kind.h): of those
// carrying host memory, only the one KOLO_TRANSPORT forces, which must then
// be usable. A kind that opened itself to find out keeps that transport for
// the world.
Status offer(const Config& config, const Membership& world, RankFacts* mine,
             std::vector<std::unique_ptr<DirectTransport>>* opened) {
  mine->host = local_host(config.host_name);
  if (world.rendezvous) mine->standby_store = world.rendezvous->standby_address();
  const TransportContext context = transport_context(config, world, "");
  const auto& kinds = transport_kinds();
  opened->resize(kinds.size());
  for (size_t k = 0; k < kinds.size(); ++k) {
    const bool host_kind = kinds[k]->carries() == TransportKind::Carries::kHostMemory;
    const bool forced = host_kind && config.transport != "auto";
    if (forced && config.transport != kinds[k]->name()) continue;
    std::string offered;
    Status why_not = kinds[k]->offer(context, &offered, &(*opened)[k]);
    if (why_not.is_ok()) {
      mine->offers[kinds[k]->name()] = offered;
    } else if (forced) {
      return why_not.with_context("KOLO_TRANSPORT=" + config.transport);
    } else {
      KOLO_DEBUG("no " << kinds[k]->name() << ": " << why_not.message());
    }
  }
  return Status::ok();
}

// Every rank publishes its facts; reading all of them doubles as the check
// that the whole world has arrived, naming any rank that has not.
Status exchange_facts(const Config& config, const RankFacts& mine, Membership* world) {
  KOLO_RETURN_IF_ERROR(world->store->set("host/" + std::to_string(world->rank), encode_rank_facts(mine)));
  std::vector<std::string> keys;
  for (int r = 0; r < world->size; ++r) keys.push_back("host/" + std::to_string(r));
  std::vector<std::string> records;
  Status s = world->store->get(keys, Deadline::after_seconds(config.timeout_s), &records);
  if (s.code() == Code::kTimeout) {
    // The store lists the missing keys as "host/N"; turn them into ranks.
    std::string missing = s.message();
    auto pos = missing.find(':');
    std::string list = pos == std::string::npos ? missing : missing.substr(pos + 1);
    std::string ranks;
    size_t i = 0;
    while ((i = list.find("host/", i)) != std::string::npos) {
      i += 5;
      size_t j = i;
      while (j < list.size() && isdigit(static_cast<unsigned char>(list[j]))) ++j;
      ranks += (ranks.empty() ? "" : ", ") + list.substr(i, j - i);
      i = j;
    }
    return timeout_error("rank(s) " + ranks + " never arrived at the rendezvous" + world->description +
                         " within KOLO_TIMEOUT_S=" + std::to_string(config.timeout_s) + " s");
  }
  KOLO_RETURN_IF_ERROR(s);
  world->facts.resize(world->size);
  for (int r = 0; r < world->size; ++r) KOLO_RETURN_IF_ERROR(decode_rank_facts(records[r], &world->facts[r]));
  return Status::ok();
}

Status meet(const Config& config, int given_local_rank, int given_local_size, Membership* world,
            std::vector<std::unique_ptr<DirectTransport>>* opened) {
  if (world->size == 1) {
    world->place(-1, -1);
    return Status::ok();
  }
  RankFacts mine;
  KOLO_RETURN_IF_ERROR(offer(config, *world, &mine, opened));
  KOLO_RETURN_IF_ERROR(exchange_facts(config, mine, world));
  world->place(given_local_rank, given_local_size);
  world->device_local_rank = world->local_rank;
  return Status::ok();
}

Status bring_up(const Config& config, const Thresholds& thresholds, const Membership& world, BringUpPlan plan,
                Wiring* out) {
  *out = Wiring();
  out->device_routes.assign(world.size, nullptr);
  out->pacing = pacing_here(config, world);
  if (world.size == 1) {
    choose_hosts(config, world, out);
    return Status::ok();
  }
  ArenaKinds arena_kinds;
  KOLO_RETURN_IF_ERROR(make_transport(config, world, plan.store_prefix, std::move(plan.opened), out, &arena_kinds));
  out->transport->set_polling(out->pacing.spin_us, out->pacing.yield);
  if (!world.facts.empty()) out->device_routes = choose_device_routes(world.facts, world.rank);
  choose_hosts(config, world, out);
  KOLO_RETURN_IF_ERROR(connect(config, thresholds, world, plan.full_mesh, out));
  return open_arenas(config, world, plan.store_prefix, arena_kinds, out);
}

Status connect_every_pair(const Config& config, const Membership& world, Transport* transport) {
  if (world.size == 1) return Status::ok();
  std::vector<int> peers;
  for (int k = 1; k < world.size; ++k) peers.push_back((world.rank + k) % world.size);
  return connect_peers(transport, peers, config.timeout_s);
}

Status connect_peers(Transport* transport, const std::vector<int>& peers, double timeout_s) {
  if (peers.empty()) return Status::ok();
  const Deadline deadline = Deadline::after_seconds(timeout_s);
  KOLO_RETURN_IF_ERROR(transport->prepare(peers));
  for (int peer : peers) KOLO_RETURN_IF_ERROR(transport->connect(peer, deadline));
  return Status::ok();
}

Thresholds thresholds_of(const Config& config) {
  Thresholds th;
  th.small_bytes = static_cast<size_t>(config.small_allreduce_bytes);
  th.forced = config.algorithm == "auto" ? nullptr : config.algorithm.c_str();
  return th;
}

Topology topology_of(const Wiring& wiring, const Membership& world, const Thresholds& thresholds,
                     ChoiceMemo* choices) {
  Topology t;
  t.rank = world.rank;
  t.size = world.size;
  t.hosts = wiring.hosts.get();  // none for KOLO_ALGORITHM=ring (choose_host_layout)
  t.arena = is_forced(thresholds, "ring") ? nullptr : wiring.arena.get();
  t.arena_reads_peers = t.arena != nullptr && t.arena->reads_peers();
  t.host_arena = wiring.host_arena.get();
  t.host_count = wiring.shape.host_count;
  t.ranks_per_host = wiring.shape.ranks_per_host;
  t.costs = &wiring.shape.costs;
  t.choices = choices;
  return t;
}

std::string describe_choices(const Wiring& wiring, const Membership& world, const Config& config,
                             const Thresholds& thresholds) {
  std::ostringstream why;
  why << std::setprecision(3);
  const CostModel& costs = wiring.shape.costs;
  const auto link = [&](const char* where, const std::string& c, const LinkCost& l) {
    why << where << " " << c << " " << l.latency_s * 1e6 << " us " << l.bytes_per_s / 1e9 << " GB/s";
  };
  why << "allreduce" << world.description << ": "
      << allreduce_choices(topology_of(wiring, world, thresholds, nullptr), thresholds) << " (";
  if (config.algorithm != "auto") why << "KOLO_ALGORITHM=" << config.algorithm << " where it applies; ";
  why << "cost model: " << world.size << " ranks on " << wiring.shape.host_count << " host(s); ";
  link("local", costs.local_class, costs.local);
  if (wiring.shape.host_count > 1) link(", remote", costs.remote_class, costs.remote);
  why << ")";
  return why.str();
}

}  // namespace kolo
