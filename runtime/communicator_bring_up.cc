// How a communicator comes up, for every way one is made (a world from the
// launcher's environment, an explicit master or a caller's store; a
// sibling; a split): meet the others at the rendezvous (world only), then
// bring_up: transports per peer, polling, algorithms, connections, the
// shared arena.
#include <algorithm>
#include <iomanip>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "collectives/algorithms.h"
#include "collectives/pipeline.h"
#include "collectives/cost_model.h"
#include "collectives/tree_schedule.h"
#include "collectives/fingerprint.h"
#include "common/cpu_caches.h"
#include "common/log.h"
#include "runtime/communicator.h"
#include "runtime/tuning.h"
#include "transport/handshake.h"
#include "transport/per_peer_transport.h"
#include "transport/routes.h"

namespace kolo {

Status Communicator::create_from_env(std::unique_ptr<Communicator>* out) {
  LaunchInfo info;
  KOLO_RETURN_IF_ERROR(read_launch_env(&info));
  Config config;
  KOLO_RETURN_IF_ERROR(load_config(&config));
  return create(info, config, out);
}

Status Communicator::create(const LaunchInfo& info, const Config& config, std::unique_ptr<Communicator>* out) {
  std::unique_ptr<Communicator> c(new Communicator(config));
  const std::string job_name =
      config.job_id.empty() ? info.master_addr + ":" + std::to_string(info.master_port) : config.job_id;
  std::shared_ptr<Rendezvous> rendezvous;
  KOLO_RETURN_IF_ERROR(Rendezvous::open(info, config, job_id_from_name(job_name), &rendezvous));
  Membership& w = c->world_;
  w.rank = info.rank;
  w.size = info.world_size;
  w.rendezvous = rendezvous;
  w.store = std::shared_ptr<Store>(rendezvous, rendezvous->store());
  w.job_name = job_name;
  w.bind_address = config.bind_address.empty() ? rendezvous->local_address() : config.bind_address;
  KOLO_RETURN_IF_ERROR(c->init(info.local_rank, info.local_size));
  *out = std::move(c);
  return Status::ok();
}

Status Communicator::create_with_store(int rank, int size, Store* store, const Config& config,
                                       std::unique_ptr<Communicator>* out) {
  std::unique_ptr<Communicator> c(new Communicator(config));
  Membership& w = c->world_;
  w.rank = rank;
  w.size = size;
  w.rendezvous = Rendezvous::borrow(store);
  w.store = std::shared_ptr<Store>(w.rendezvous, store);
  w.job_name = config.job_id.empty() ? "in-process" : config.job_id;
  w.bind_address = config.bind_address.empty() ? "127.0.0.1" : config.bind_address;
  KOLO_RETURN_IF_ERROR(c->init(-1, -1));
  *out = std::move(c);
  return Status::ok();
}

Status Communicator::create_sibling(Communicator* parent, const std::string& prefix, bool full_mesh,
                                    std::unique_ptr<Communicator>* out) {
  std::unique_ptr<Communicator> c(new Communicator(parent->config_));
  c->world_ = parent->world_;
  c->sibling_prefix_ = prefix;
  KOLO_RETURN_IF_ERROR(c->bring_up(prefix, full_mesh, {}));
  *out = std::move(c);
  return Status::ok();
}

Status Communicator::split(int color, int key, std::unique_ptr<Communicator>* out) {
  *out = nullptr;
  if (color < 0 && color != kSplitNoColor) {
    return invalid_argument("color " + std::to_string(color) + " is negative (KOLO_SPLIT_NOCOLOR is " +
                            std::to_string(kSplitNoColor) + ")");
  }
  // Every rank's (color, key), over this communicator itself: a rank that
  // calls another collective meanwhile makes both fail with MISMATCH.
  const int64_t mine[2] = {color, key};
  std::vector<int64_t> all(2 * static_cast<size_t>(world_.size));
  KOLO_RETURN_IF_ERROR(allgather(mine, all.data(), 2, DataType::kInt64));
  const uint64_t sequence = splits_++;
  if (color == kSplitNoColor) return Status::ok();
  std::vector<int> members;  // parent ranks, in the new communicator's order
  for (int r = 0; r < world_.size; ++r) {
    if (all[2 * r] == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return all[2 * a + 1] < all[2 * b + 1]; });

  const std::string name = "split" + std::to_string(sequence) + "." + std::to_string(color) + "/";
  std::unique_ptr<Communicator> c(new Communicator(config_));
  c->world_ = world_.subset(members, name);
  KOLO_RETURN_IF_ERROR(c->bring_up("", /*full_mesh=*/false, {}));
  KOLO_DEBUG("split " << name << ": rank " << c->world_.rank << " of " << c->world_.size);
  *out = std::move(c);
  return Status::ok();
}

Status Communicator::init(int local_rank, int local_size) {
  if (world_.size < 1 || world_.rank < 0 || world_.rank >= world_.size) {
    return invalid_argument("rank " + std::to_string(world_.rank) + " of world size " + std::to_string(world_.size) +
                            " is impossible");
  }
  install_fingerprint_describer();
  set_log_prefix("rank " + std::to_string(world_.rank));
  world_.transport = config_.transport;
  std::vector<std::unique_ptr<DirectTransport>> opened;
  KOLO_RETURN_IF_ERROR(meet(local_rank, local_size, &opened));
  KOLO_RETURN_IF_ERROR(bring_up("", /*full_mesh=*/false, std::move(opened)));
  KOLO_INFO("communicator ready: rank " << world_.rank << " of " << world_.size << ", local " << world_.local_rank << " of "
                                        << world_.local_size);
  return Status::ok();
}

Status Communicator::bring_up(const std::string& store_prefix, bool full_mesh,
                              std::vector<std::unique_ptr<DirectTransport>> opened) {
  CallLauncher::Hooks hooks;
  hooks.run = [this](const CallRecord& call, CallLauncher::CollectiveRef fn) { return run(call, fn); };
  hooks.healthy = [this] { return check_healthy(); };
  hooks.adapt = [this](GpuContext* gpu, ScheduleContext* ctx) {
    return gpu->adapt(ctx, transport_.get(), device_routes_, config_);
  };
  launcher_ = std::make_unique<CallLauncher>(config_.device, world_.device_local_rank, config_.timeout_s,
                                             std::move(hooks));
  KOLO_RETURN_IF_ERROR(make_transport(store_prefix, std::move(opened)));
  device_routes_.assign(world_.size, nullptr);
  if (!world_.facts.empty()) device_routes_ = choose_device_routes(world_.facts, world_.rank);
  choose_pacing();
  choose_algorithm();
  KOLO_RETURN_IF_ERROR(full_mesh ? connect_all() : connect_ring());
  KOLO_RETURN_IF_ERROR(open_arena(store_prefix));
  if (store_prefix.empty() && world_.rank == 0 && world_.size > 1) KOLO_INFO(describe_choices());
  // The engine's siblings (a prefix of their own) record their own rounds,
  // but only communicators the caller made answer SIGUSR1.
  if (store_prefix.empty()) listen_for_dump_signal();
  return Status::ok();
}

TransportContext Communicator::transport_context(const std::string& store_prefix) const {
  TransportContext context;
  context.store = world_.store.get();
  context.rank = world_.rank;
  context.size = world_.size;
  // 1 until the ranks have met (offers are made before anyone is placed).
  context.ranks_on_host =
      std::max(1, static_cast<int>(std::count(world_.same_host.begin(), world_.same_host.end(), true)));
  context.store_prefix = store_prefix;
  context.job_name = world_.job_name;
  context.bind_address = world_.bind_address;
  context.timeout_s = config_.timeout_s;
  context.settings = setting_values(config_);
  return context;
}

Status Communicator::make_transport(const std::string& store_prefix,
                                    std::vector<std::unique_ptr<DirectTransport>> opened_early) {
  if (world_.size == 1) return Status::ok();
  Routes routes;
  KOLO_RETURN_IF_ERROR(choose_routes(world_.facts, world_.rank, world_.transport, &routes));
  const TransportContext context = transport_context(store_prefix);
  // Each kind of transport in use opened once, in order of preference
  // (or taken from what its offer opened); every peer routed to its own.
  const auto& kinds = transport_kinds();
  std::vector<std::unique_ptr<DirectTransport>> opened;
  std::vector<int> routed(world_.size, 0);
  opened_early.resize(kinds.size());
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (std::find(routes.kind.begin(), routes.kind.end(), kinds[k]) == routes.kind.end()) continue;
    std::unique_ptr<DirectTransport> t = std::move(opened_early[k]);
    if (!t) KOLO_RETURN_IF_ERROR(kinds[k]->open(context, &t));
    for (int peer = 0; peer < world_.size; ++peer) {
      if (routes.kind[peer] == kinds[k]) routed[peer] = static_cast<int>(opened.size());
    }
    opened.push_back(std::move(t));
  }
  // The shared arena needs every peer reached through memory, by one kind;
  // a host's arena, every other rank of the host.
  arena_kind_ = opened.size() == 1 ? routes.kind[world_.rank == 0 ? 1 : 0] : nullptr;
  host_arena_kind_ = nullptr;
  bool one_kind = true;
  for (int peer = 0; peer < world_.size; ++peer) {
    if (peer == world_.rank || world_.facts[peer].host != world_.facts[world_.rank].host) continue;
    if (host_arena_kind_ && routes.kind[peer] != host_arena_kind_) one_kind = false;
    host_arena_kind_ = routes.kind[peer];
  }
  if (!one_kind) host_arena_kind_ = nullptr;
  // Said once per process, for the first communicator (the world).
  static std::once_flag told;
  std::call_once(told, [&] {
    KOLO_INFO("transports: " << routes.summary);
    if (!routes.same_machine_warning.empty()) KOLO_WARN(routes.same_machine_warning);
  });
  KOLO_DEBUG("transports" << world_.description << ": " << routes.summary);
  if (opened.size() == 1) {
    transport_ = std::move(opened[0]);
  } else {
    std::unique_ptr<PerPeerTransport> per_peer;
    KOLO_RETURN_IF_ERROR(PerPeerTransport::create(std::move(opened), std::move(routed), &per_peer));
    transport_ = std::move(per_peer);
  }
  host_memory_.attach(transport_.get());
  return Status::ok();
}

Status Communicator::meet(int given_local_rank, int given_local_size,
                          std::vector<std::unique_ptr<DirectTransport>>* opened) {
  if (world_.size == 1) {
    world_.place(-1, -1);
    return Status::ok();
  }
  RankFacts mine;
  KOLO_RETURN_IF_ERROR(offer(&mine, opened));
  KOLO_RETURN_IF_ERROR(exchange_facts(mine));
  world_.place(given_local_rank, given_local_size);
  world_.device_local_rank = world_.local_rank;
  return Status::ok();
}

Status Communicator::offer(RankFacts* mine, std::vector<std::unique_ptr<DirectTransport>>* opened) {
  // What each kind of transport offers here (transport/kind.h): of those
  // carrying host memory, only the one KOLO_TRANSPORT forces, which must
  // then be usable. A kind that opened itself to find out keeps that
  // transport for the world.
  mine->host = local_host(config_.host_name);
  if (world_.rendezvous) mine->standby_store = world_.rendezvous->standby_address();
  const TransportContext context = transport_context("");
  const auto& kinds = transport_kinds();
  opened->resize(kinds.size());
  for (size_t k = 0; k < kinds.size(); ++k) {
    const bool host_kind = kinds[k]->carries() == TransportKind::Carries::kHostMemory;
    const bool forced = host_kind && config_.transport != "auto";
    if (forced && config_.transport != kinds[k]->name()) continue;
    std::string offer;
    Status why_not = kinds[k]->offer(context, &offer, &(*opened)[k]);
    if (why_not.is_ok()) {
      mine->offers[kinds[k]->name()] = offer;
    } else if (forced) {
      return why_not.with_context("KOLO_TRANSPORT=" + config_.transport);
    } else {
      KOLO_DEBUG("no " << kinds[k]->name() << ": " << why_not.message());
    }
  }
  return Status::ok();
}

Status Communicator::exchange_facts(const RankFacts& mine) {
  // Every rank publishes its facts; reading all of them doubles as the
  // check that the whole world has arrived, naming any rank that has not.
  KOLO_RETURN_IF_ERROR(world_.store->set("host/" + std::to_string(world_.rank), encode_rank_facts(mine)));
  std::vector<std::string> keys;
  for (int r = 0; r < world_.size; ++r) keys.push_back("host/" + std::to_string(r));
  std::vector<std::string> records;
  Status s = world_.store->get(keys, Deadline::after_seconds(config_.timeout_s), &records);
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
    return timeout_error("rank(s) " + ranks + " never arrived at the rendezvous" + world_.description +
                         " within KOLO_TIMEOUT_S=" + std::to_string(config_.timeout_s) + " s");
  }
  KOLO_RETURN_IF_ERROR(s);
  world_.facts.resize(world_.size);
  for (int r = 0; r < world_.size; ++r) KOLO_RETURN_IF_ERROR(decode_rank_facts(records[r], &world_.facts[r]));
  return Status::ok();
}

void Communicator::choose_pacing() {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const Pacing pacing = kolo::choose_pacing(config_, world_.machine_ranks, cores, cpu_caches().l2);
  if (transport_) transport_->set_polling(pacing.spin_us, pacing.yield);
  polling_ = {pacing.spin_us, pacing.yield};
  segment_bytes_ = pacing.segment_bytes;
  KOLO_DEBUG("polling: spin " << pacing.spin_us << " us, yield " << pacing.yield << "; segment " << segment_bytes_
                              << " bytes (" << world_.machine_ranks << " rank(s) on " << cores << " core(s))");
}

std::string Communicator::describe_choices() const {
  std::ostringstream why;
  why << std::setprecision(3);
  const auto link = [&](const char* where, const std::string& c, const LinkCost& l) {
    why << where << " " << c << " " << l.latency_s * 1e6 << " us " << l.bytes_per_s / 1e9 << " GB/s";
  };
  why << "allreduce" << world_.description << ": " << allreduce_choices(topology(), thresholds()) << " (";
  if (config_.algorithm != "auto") why << "KOLO_ALGORITHM=" << config_.algorithm << " where it applies; ";
  why << "cost model: " << world_.size << " ranks on " << host_count_ << " host(s); ";
  link("local", costs_.local_class, costs_.local);
  if (host_count_ > 1) link(", remote", costs_.remote_class, costs_.remote);
  why << ")";
  return why.str();
}

void Communicator::choose_algorithm() {
  choices_.clear();  // made with the old numbers
  CostShape shape = choose_costs(config_, world_.facts, world_.transport, segment_bytes_);
  host_count_ = shape.host_count;
  ranks_per_host_ = shape.ranks_per_host;
  costs_ = shape.costs;
  bool hierarchical_refused = false;
  hosts_ = choose_host_layout(config_, world_.facts, world_.rank, &hierarchical_refused);
  if (hierarchical_refused) {
    static std::once_flag told;
    std::call_once(told, [] {
      KOLO_WARN("KOLO_ALGORITHM=hierarchical needs ranks on several hosts, the same number (two or more) on "
                "each; using the others");
    });
  }
  if (hosts_) {
    KOLO_DEBUG("hierarchical allreduce: local ranks " << hosts_->local.size() << ", hosts " << hosts_->cross.size());
  }
}

Status Communicator::open_arena(const std::string& store_prefix) {
  // Every peer reached by one kind that maps memory: the allreduce can then
  // read its peers' data where they put it (arena_allreduce.h). Made
  // whatever this rank's KOLO_ALGORITHM, which may differ from another's:
  // the decision must be the same on every rank (topology() leaves the
  // arena out for KOLO_ALGORITHM=ring).
  if (world_.size == 1) return Status::ok();
  if (!arena_kind_ || !arena_kind_->shares_memory()) return open_host_arena(store_prefix);
  static std::once_flag told;
  return open_arena_of(arena_kind_, transport_context(store_prefix), told, "allreduce takes the ring instead", &arena_);
}

Status Communicator::open_host_arena(const std::string& store_prefix) {
  // The hierarchical schedules' phases within a host go through an arena
  // among the host's ranks, where the ranks span several hosts with two or
  // more on each (make_host_layout) and one kind that maps memory reaches
  // every other rank of the host. The facts and the routes decide, alike on
  // every rank of the host; never KOLO_ALGORITHM, which may differ between
  // ranks (a rank waiting for an arena its host's first rank never made
  // would wait out the deadline).
  if (!host_arena_kind_ || !host_arena_kind_->shares_memory()) return Status::ok();
  HostLayout layout;
  if (!host_layout(&layout)) return Status::ok();
  // Named after the host's first rank: emulated hosts share one /dev/shm.
  TransportContext context = transport_context(store_prefix + "host" + std::to_string(layout.local.front()) + "/");
  context.rank = layout.local_index;
  context.size = static_cast<int>(layout.local.size());
  static std::once_flag told;
  return open_arena_of(host_arena_kind_, context, told, "within a host the hierarchical schedules take the ring",
                       &host_arena_);
}

Status Communicator::open_arena_of(const TransportKind* kind, const TransportContext& context, std::once_flag& told,
                                   const char* instead, std::unique_ptr<SharedArena>* out) {
  Status s = kind->open_arena(context, polling_.spin_us, polling_.yield, Deadline::after_seconds(config_.timeout_s), out);
  if (s.code() != Code::kUnsupported) return s;
  std::call_once(told, [&] { KOLO_WARN(s.message() << "; " << instead); });
  out->reset();
  return Status::ok();
}

bool Communicator::host_layout(HostLayout* out) const {
  std::vector<std::string> host_of_rank;
  for (const RankFacts& f : world_.facts) host_of_rank.push_back(f.host);
  return make_host_layout(host_of_rank, world_.rank, out);
}

Status Communicator::connect_ring() {
  if (world_.size == 1) return Status::ok();
  const Deadline deadline = Deadline::after_seconds(config_.timeout_s);
  // Every peer an algorithm may exchange with: a connection made lazily
  // inside a collective could leave a rank waiting for a peer that has
  // already failed, with no socket to tell it so.
  const std::vector<int> peers = algorithm_peers(topology(), thresholds());
  KOLO_RETURN_IF_ERROR(transport_->prepare(peers));
  for (int peer : peers) KOLO_RETURN_IF_ERROR(transport_->connect(peer, deadline));
  return Status::ok();
}

Status Communicator::connect_all() {
  if (world_.size == 1) return Status::ok();
  const Deadline deadline = Deadline::after_seconds(config_.timeout_s);
  // Any order works: the accepting side's listener takes connections in the
  // background, whatever this rank is doing.
  std::vector<int> peers;
  for (int k = 1; k < world_.size; ++k) peers.push_back((world_.rank + k) % world_.size);
  KOLO_RETURN_IF_ERROR(transport_->prepare(peers));
  for (int peer : peers) KOLO_RETURN_IF_ERROR(transport_->connect(peer, deadline));
  return Status::ok();
}


}  // namespace kolo
