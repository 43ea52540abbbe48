#include "runtime/communicator.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/alltoall.h"
#include "collectives/fingerprint.h"
#include "collectives/recursive_doubling.h"
#include "collectives/rooted.h"
#include "common/log.h"
#include "common/rank_list.h"
#include "common/ranges.h"
#include "gpu/device.h"
#include "runtime/argument_checks.h"
#include "runtime/engine.h"
#include "runtime/failure_record.h"
#include "transport/handshake.h"
#include "transport/per_peer_transport.h"
#include "transport/routes.h"

namespace kolo {

Communicator::Communicator(const Config& config) : config_(config) {}

Communicator::~Communicator() {
  engine_.reset();  // it uses this communicator's store
  stream_queue_->stop();  // runs what callers enqueued (bounded by their deadlines)
  stream_queue_.reset();
  if (transport_) transport_->abort();
  arena_.reset();
  host_memory_.attach(nullptr);  // deregisters it while the transport lives
  transport_.reset();
}

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
  KOLO_RETURN_IF_ERROR(allgather(mine, all.data(), 2, static_cast<int>(DataType::kInt64)));
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
  KOLO_RETURN_IF_ERROR(make_transport(store_prefix, std::move(opened)));
  choose_polling();
  choose_algorithm();
  KOLO_RETURN_IF_ERROR(full_mesh ? connect_all() : connect_ring());
  return open_arena(store_prefix);
}

TransportContext Communicator::transport_context(const std::string& store_prefix) const {
  TransportContext context;
  context.store = world_.store.get();
  context.rank = world_.rank;
  context.size = world_.size;
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
  // The shared arena needs every peer reached through memory, by one kind.
  arena_kind_ = opened.size() == 1 && kinds.size() > 0 ? routes.kind[world_.rank == 0 ? 1 : 0] : nullptr;
  // Said once per process, for the first communicator (the world).
  static std::once_flag told;
  std::call_once(told, [&] { KOLO_INFO("transports: " << routes.summary); });
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
  // What each kind of transport offers here (transport/kind.h): only the
  // forced one under KOLO_TRANSPORT, which must then be usable. A kind
  // that opened itself to find out keeps that transport for the world.
  RankFacts mine;
  mine.host = local_host(config_.host_name);
  const TransportContext context = transport_context("");
  const auto& kinds = transport_kinds();
  opened->resize(kinds.size());
  for (size_t k = 0; k < kinds.size(); ++k) {
    if (config_.transport != "auto" && config_.transport != kinds[k]->name()) continue;
    std::string offer;
    Status why_not = kinds[k]->offer(context, &offer, &(*opened)[k]);
    if (why_not.is_ok()) {
      mine.offers[kinds[k]->name()] = offer;
    } else if (config_.transport != "auto") {
      return why_not.with_context("KOLO_TRANSPORT=" + config_.transport);
    } else {
      KOLO_DEBUG("no " << kinds[k]->name() << ": " << why_not.message());
    }
  }
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
    return timeout_error("rank(s) " + ranks + " never arrived at the rendezvous within KOLO_TIMEOUT_S=" +
                         std::to_string(config_.timeout_s) + " s");
  }
  KOLO_RETURN_IF_ERROR(s);
  world_.facts.resize(world_.size);
  for (int r = 0; r < world_.size; ++r) KOLO_RETURN_IF_ERROR(decode_rank_facts(records[r], &world_.facts[r]));
  world_.place(given_local_rank, given_local_size);
  world_.device_local_rank = world_.local_rank;
  return Status::ok();
}

void Communicator::choose_polling() {
  // Busy-polling saves the cost of waking a sleeping process (tens of
  // microseconds in a VM) but steals the core from other ranks when they
  // outnumber the cores. What counts is how many ranks share this kernel's
  // cores: several emulated "hosts" (network namespaces, containers) on one
  // machine share them even if the launcher calls each a host of its own.
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  const bool own_core = world_.machine_ranks <= cores;
  const int spin_us = config_.spin_us >= 0 ? static_cast<int>(config_.spin_us) : own_core ? 2000 : 50;
  const bool yield = config_.spin_yield >= 0 ? config_.spin_yield != 0 : !own_core;
  if (transport_) transport_->set_polling(spin_us, yield);
  polling_ = {spin_us, yield};
  KOLO_DEBUG("polling: spin " << spin_us << " us, yield " << yield << " (" << world_.machine_ranks << " rank(s) on "
                              << cores << " core(s))");
}

void Communicator::choose_algorithm() {
  hosts_.reset();
  if (config_.algorithm == "ring" || world_.facts.size() < 2) return;
  std::vector<std::string> host_of_rank;
  for (const RankFacts& f : world_.facts) host_of_rank.push_back(f.host);
  auto layout = std::make_unique<HostLayout>();
  if (!make_host_layout(host_of_rank, world_.rank, layout.get())) {
    if (config_.algorithm == "hierarchical") {
      static std::once_flag told;
      std::call_once(told, [] {
        KOLO_WARN("KOLO_ALGORITHM=hierarchical needs ranks on several hosts, the same number (two or more) on "
                  "each; using the others");
      });
    }
    return;
  }
  hosts_ = std::move(layout);
  KOLO_DEBUG("hierarchical allreduce: local ranks " << hosts_->local.size() << ", hosts " << hosts_->cross.size());
}

Status Communicator::open_arena(const std::string& store_prefix) {
  // Every peer reached by one kind that maps memory: the allreduce can then
  // read its peers' data where they put it (arena_allreduce.h). Made
  // whatever this rank's KOLO_ALGORITHM, which may differ from another's:
  // the decision must be the same on every rank (topology() leaves the
  // arena out for KOLO_ALGORITHM=ring).
  if (world_.size == 1 || !arena_kind_ || !arena_kind_->shares_memory()) return Status::ok();
  std::unique_ptr<SharedArena> arena;
  Status s = arena_kind_->open_arena(transport_context(store_prefix), polling_.spin_us, polling_.yield,
                                     Deadline::after_seconds(config_.timeout_s), &arena);
  if (s.code() == Code::kUnsupported) {
    // Every rank learns it alike and keeps the ring over the transport.
    static std::once_flag told;
    std::call_once(told, [&] { KOLO_WARN(s.message() << "; allreduce takes the ring instead"); });
    return Status::ok();
  }
  KOLO_RETURN_IF_ERROR(s);
  arena_ = std::move(arena);
  return Status::ok();
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

RingContext Communicator::ring_context() {
  RingContext ctx;
  ctx.transport = transport_.get();
  ctx.rank = world_.rank;
  ctx.size = world_.size;
  ctx.left = (world_.rank + world_.size - 1) % world_.size;
  ctx.right = (world_.rank + 1) % world_.size;
  ctx.segment_bytes = static_cast<size_t>(config_.segment_bytes);
  ctx.pipeline.staging_slots = static_cast<size_t>(config_.pipeline_depth);
  ctx.pipeline.timeout_s = config_.timeout_s;
  ctx.memory = &host_memory_;
  ctx.reduce_scatter_done = rs_mark_;
  return ctx;
}

Topology Communicator::topology() const {
  Topology t;
  t.rank = world_.rank;
  t.size = world_.size;
  t.hosts = hosts_.get();  // none for KOLO_ALGORITHM=ring (choose_algorithm)
  t.arena = config_.algorithm == "ring" ? nullptr : arena_.get();
  return t;
}

Thresholds Communicator::thresholds() const {
  Thresholds th;
  th.small_bytes = static_cast<size_t>(config_.small_allreduce_bytes);
  // KOLO_ALGORITHM=hierarchical: at every size where it applies; auto:
  // above the latency-bound sizes.
  th.hierarchical_bytes = config_.algorithm == "hierarchical" ? 0 : th.small_bytes + 1;
  return th;
}

const char* Communicator::allreduce_algorithm(size_t bytes) {
  return kolo::allreduce_algorithm(topology(), thresholds(), bytes, /*host_memory=*/true);
}

Status Communicator::check_healthy() const {
  if (!failed_.load()) return Status::ok();
  std::lock_guard<std::mutex> lock(error_mutex_);
  return Status(sticky_.code(), "communicator failed earlier: " + sticky_.message());
}

Status Communicator::async_error() const {
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!sticky_.is_ok()) return sticky_;
  }
  std::lock_guard<std::mutex> lock(engine_mutex_);
  if (engine_ && engine_->error().code() != Code::kInvalidUsage) return engine_->error();
  return Status::ok();
}

Engine* Communicator::engine() {
  std::lock_guard<std::mutex> lock(engine_mutex_);
  if (!engine_) engine_ = std::make_unique<Engine>(this);
  return engine_.get();
}

namespace {

constexpr char kFailureKey[] = "failure";

}  // namespace

Status Communicator::fail(Status local) {
  Status final = local;
  if (world_.store && world_.size > 1) {
    // Bounded: the store may be gone with rank 0.
    const std::string mine = encode_failure({world_.rank, local.code(), local.message()});
    std::string first;
    Status st = world_.store->set_if_absent(kFailureKey, mine, Deadline::after_seconds(std::min(config_.timeout_s, 2.0)),
                                      &first);
    FailureRecord root;
    if (st.is_ok() && first != mine && decode_failure(first, &root).is_ok() && root.rank != world_.rank) {
      final = Status(root.code, local.message() + "; the job's first failure was on rank " +
                                    std::to_string(root.rank) + ": " + root.message);
    } else if (!st.is_ok() && world_.rank != 0) {
      final = Status(local.code(), local.message() +
                                       "; the rendezvous store on rank 0 is unreachable too, so rank 0 has "
                                       "probably failed or exited");
    }
  }
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (sticky_.is_ok()) sticky_ = final;
    final = sticky_;
  }
  failed_.store(true);
  if (world_.rendezvous) world_.rendezvous->mark_failed();
  if (transport_) transport_->abort();
  if (arena_) arena_->abort();
  return final;
}

template <typename Fn>
Status Communicator::run(const char* what, Fn&& fn) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  KOLO_RETURN_IF_ERROR(check_healthy());
  Status s = fn(ring_context());
  if (s.is_ok()) return s;
  s = fail(s.with_context(std::string(what) + " on rank " + std::to_string(world_.rank) + world_.description));
  KOLO_ERROR(s.message());
  return s;
}

Status Communicator::register_memory(const void* data, size_t bytes) {
  if (data == nullptr && bytes > 0) return invalid_argument("buf is NULL with bytes = " + std::to_string(bytes));
  std::lock_guard<std::mutex> lock(call_mutex_);
  KOLO_RETURN_IF_ERROR(check_healthy());
  if (!transport_ || bytes == 0) return Status::ok();
  return transport_->register_memory(data, bytes);
}

Status Communicator::deregister_memory(const void* data, size_t bytes) {
  if (data == nullptr && bytes > 0) return invalid_argument("buf is NULL with bytes = " + std::to_string(bytes));
  std::lock_guard<std::mutex> lock(call_mutex_);
  if (transport_ && bytes > 0) transport_->deregister_memory(data, bytes);
  return Status::ok();
}

Status Communicator::allreduce(const void* send, void* recv, size_t count, int dtype, int op, Launch launch) {
  KOLO_RETURN_IF_ERROR(check_reduction(dtype, op, send, recv, count));
  const size_t bytes = count * dtype_size(static_cast<DataType>(dtype));
  if (send != recv && ranges_overlap(send, bytes, recv, bytes)) {
    return invalid_argument("sendbuf and recvbuf overlap without being equal");
  }
  return dispatch("allreduce", {{send, bytes, "sendbuf"}, {recv, bytes, "recvbuf"}}, std::move(launch),
                  [=](const RingContext& ctx) {
                    const std::vector<Span> spans = {Span{send, recv, count}};
                    return kolo::allreduce(ctx, topology(), thresholds(),
                                           {spans, static_cast<DataType>(dtype), static_cast<ReduceOp>(op)});
                  });
}

Status Communicator::allgather(const void* send, void* recv, size_t send_count, int dtype, Launch launch) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_buffer(send, send_count, "sendbuf"));
  KOLO_RETURN_IF_ERROR(check_buffer(recv, send_count, "recvbuf"));
  const size_t block = send_count * dtype_size(static_cast<DataType>(dtype));
  const void* own = static_cast<const char*>(recv) + world_.rank * block;
  if (send != recv && send != own && ranges_overlap(send, block, recv, block * world_.size)) {
    return invalid_argument("sendbuf overlaps recvbuf but is neither recvbuf nor this rank's block of it");
  }
  return dispatch("allgather", {{send, block, "sendbuf"}, {recv, block * world_.size, "recvbuf"}}, std::move(launch),
                  [=](const RingContext& ctx) {
                    const std::vector<size_t> counts(world_.size, send_count);
                    return kolo::allgather(ctx, topology(), thresholds(),
                                           {send, recv, counts, packed_or({}, counts), static_cast<DataType>(dtype)});
                  });
}

Status Communicator::broadcast(void* buf, size_t count, int dtype, int root, Launch launch) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_buffer(buf, count, "buf"));
  if (root < 0 || root >= world_.size) {
    return invalid_argument("root " + std::to_string(root) + " is not a rank of a world of " +
                            std::to_string(world_.size));
  }
  const size_t bytes = count * dtype_size(static_cast<DataType>(dtype));
  return dispatch("broadcast", {{buf, bytes, "buf"}}, std::move(launch), [=](const RingContext& ctx) {
    return ring_broadcast(ctx, buf, count, static_cast<DataType>(dtype), root);
  });
}

Status Communicator::reduce_scatter(const void* send, void* recv, size_t recv_count, int dtype, int op, Launch launch) {
  KOLO_RETURN_IF_ERROR(check_reduction(dtype, op, send, recv, recv_count));
  const size_t block = recv_count * dtype_size(static_cast<DataType>(dtype));
  return dispatch("reduce_scatter", {{send, block * world_.size, "sendbuf"}, {recv, block, "recvbuf"}},
                  std::move(launch),
                  [=](const RingContext& ctx) {
                    const std::vector<size_t> counts(world_.size, recv_count);
                    return kolo::reduce_scatter(ctx, topology(), thresholds(),
                                                {send, recv, counts, static_cast<DataType>(dtype),
                                                 static_cast<ReduceOp>(op)});
                  });
}

Status Communicator::gpu_ordinal(int* ordinal) {
  std::lock_guard<std::mutex> order(stream_mutex_);
  Device* device = nullptr;
  KOLO_RETURN_IF_ERROR(gpu()->device(&device));
  *ordinal = device->ordinal();
  return Status::ok();
}

GpuContext* Communicator::gpu() {
  if (!gpu_) gpu_ = std::make_unique<GpuContext>(config_.device, world_.device_local_rank);
  return gpu_.get();
}

Status Communicator::dispatch(const char* what, const std::vector<NamedBuffer>& buffers, Launch launch,
                              Collective fn) {
  std::lock_guard<std::mutex> order(stream_mutex_);
  bool on_device = false;
  KOLO_RETURN_IF_ERROR(gpu()->classify(buffers, &on_device));
  if (launch.on_stream) return enqueue_on_stream(what, on_device, launch.stream, std::move(fn));
  if (!launch.done.empty()) return enqueue_async(what, on_device, std::move(launch.done), std::move(fn));
  // Collectives reach the ring in the order they were called: what is
  // still queued on streams goes first.
  if (!stream_queue_->drain(Deadline::after_seconds(config_.timeout_s))) {
    return timeout_error(std::string(what) + ": collectives enqueued on streams earlier did not finish within "
                         "KOLO_TIMEOUT_S");
  }
  if (!on_device) return run(what, fn);
  // Blocking on device buffers: after the work already on the legacy
  // default stream (which follows every blocking stream), as a
  // cudaMemcpy would be.
  Device* device = nullptr;
  KOLO_RETURN_IF_ERROR(gpu()->device(&device));
  StreamPoint point;
  KOLO_RETURN_IF_ERROR(device->capture(nullptr, &point));
  device->wait(point);
  return run_on_device(what, fn);
}

Status Communicator::enqueue_on_stream(const char* what, bool on_device, void* stream, Collective fn) {
  KOLO_RETURN_IF_ERROR(check_healthy());
  Device* device = nullptr;
  Status s = gpu()->device(&device);
  if (!s.is_ok()) return Status(s.code(), std::string(what) + " on a CUDA stream: " + s.message());
  StreamPoint point;
  KOLO_RETURN_IF_ERROR(device->capture(stream, &point));
  const uint64_t value = stream_ops_ + 1;
  s = device->hold(stream, value);
  if (!s.is_ok()) {
    device->wait(point);  // frees the point; kolo's stream passes it at once
    return s.with_context(std::string(what) + " on a CUDA stream");
  }
  stream_ops_ = value;
  stream_queue_->push([this, device, point, value, what, on_device, fn = std::move(fn)] {
    device->wait(point);
    if (on_device) {
      (void)run_on_device(what, fn);
    } else {
      // Host buffers: the stream's earlier work (a copy into them) must
      // have run before the host touches them.
      (void)run(what, [&](const RingContext& ctx) {
        KOLO_RETURN_IF_ERROR(device->synchronize(Deadline::after_seconds(config_.timeout_s)));
        return fn(ctx);
      });
    }
    // Always: a failed collective (now the sticky error) must not leave
    // the caller's stream waiting forever.
    device->signal(value);
  });
  return Status::ok();
}

Status Communicator::enqueue_async(const char* what, bool on_device, std::vector<std::shared_ptr<OpHandle>> done,
                                   Collective fn) {
  KOLO_RETURN_IF_ERROR(check_healthy());
  // Device buffers: after the work already on the legacy default stream at
  // the time of the call, as the blocking call would be.
  Device* device = nullptr;
  StreamPoint point;
  if (on_device) {
    KOLO_RETURN_IF_ERROR(gpu()->device(&device));
    KOLO_RETURN_IF_ERROR(device->capture(nullptr, &point));
  }
  auto result = std::make_shared<Status>();
  std::weak_ptr<StreamQueue> queue = stream_queue_;
  for (const auto& handle : done) {
    handle->set_helper([queue] {
      auto q = queue.lock();
      return q ? q->run_next_here() : StreamQueue::Ran::kNotThisThread;
    });
  }
  stream_queue_->push(
      [this, what, device, point, on_device, result, fn = std::move(fn)] {
        if (!on_device) {
          *result = run(what, fn);
          return;
        }
        device->wait(point);
        *result = run_on_device(what, fn);
      },
      // After the job: a callback may enqueue more, and a blocking call
      // draining the queue need not wait for it.
      [result, done = std::move(done)] {
        for (const auto& handle : done) handle->complete(*result);
      });
  return Status::ok();
}

Status Communicator::run_on_device(const char* what, const Collective& fn) {
  return run(what, [&](const RingContext& host_ctx) {
    RingContext ctx = host_ctx;
    KOLO_RETURN_IF_ERROR(gpu()->adapt(&ctx, transport_.get(), world_.same_host, config_));
    Device* device = nullptr;
    KOLO_RETURN_IF_ERROR(gpu()->device(&device));
    const Deadline deadline = Deadline::after_seconds(config_.timeout_s);
    Status s = fn(ctx);
    // Even after a failure: nothing may still run on buffers the caller
    // gets back.
    Status done = device->synchronize(deadline);
    return s.is_ok() ? done : s;
  });
}

Status Communicator::barrier(Launch launch) {
  return dispatch("barrier", {}, std::move(launch), [](const RingContext& ctx) { return ring_barrier(ctx); });
}

Status Communicator::allgather_v(const void* send, void* recv, const std::vector<size_t>& counts, int dtype) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  if (counts.size() != static_cast<size_t>(world_.size)) return invalid_argument("allgather_v needs one count per rank");
  return run("allgather", [&](const RingContext& ctx) {
    return kolo::allgather(ctx, topology(), thresholds(),
                           {send, recv, counts, packed_or({}, counts), static_cast<DataType>(dtype)});
  });
}

Status Communicator::reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& counts, int dtype,
                                      int op) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_op(op));
  if (counts.size() != static_cast<size_t>(world_.size)) return invalid_argument("reduce_scatter_v needs one count per rank");
  return run("reduce_scatter", [&](const RingContext& ctx) {
    return kolo::reduce_scatter(ctx, topology(), thresholds(),
                                {send, recv, counts, static_cast<DataType>(dtype), static_cast<ReduceOp>(op)});
  });
}

Status Communicator::alltoall(const void* send, const std::vector<size_t>& send_counts, void* recv,
                              const std::vector<size_t>& recv_counts, int dtype) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  if (send_counts.size() != static_cast<size_t>(world_.size) || recv_counts.size() != static_cast<size_t>(world_.size)) {
    return invalid_argument("alltoall needs one send and one receive count per rank");
  }
  return run("alltoall", [&](const RingContext& ctx) {
    return pairwise_alltoall(ctx, send, send_counts, recv, recv_counts, static_cast<DataType>(dtype));
  });
}

Status Communicator::allreduce_spans(const std::vector<Span>& spans, int dtype, int op) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_op(op));
  for (const Span& s : spans) {
    KOLO_RETURN_IF_ERROR(check_buffer(s.send, s.count, "span send"));
    KOLO_RETURN_IF_ERROR(check_buffer(s.recv, s.count, "span recv"));
  }
  return run("allreduce", [&](const RingContext& ctx) {
    return kolo::allreduce(ctx, topology(), thresholds(),
                           {spans, static_cast<DataType>(dtype), static_cast<ReduceOp>(op)});
  });
}

Status Communicator::run_custom(const char* what, const std::function<Status(const RingContext&)>& fn) {
  return run(what, fn);
}

void Communicator::interrupt() {
  if (transport_) transport_->interrupt();
}

void Communicator::cancel_store_waits(const Status& why) {
  if (world_.store) world_.store->cancel(why);
}

void Communicator::abort() {
  {
    std::lock_guard<std::mutex> lock(engine_mutex_);
    if (engine_) engine_->abort();
  }
  if (failed_.load()) return;
  // The resulting error is kept as the sticky one; calls report it.
  Status why = aborted("rank " + std::to_string(world_.rank) + " aborted its communicator (kolo_comm_abort)");
  cancel_store_waits(why);
  (void)fail(why);
}

// The checks of the collectives below (kolo.h's kolo_reduce .. kolo_alltoallv).
namespace {

// A buffer as dispatch() classifies it: by its address even when empty, so
// that a rank with nothing to send or receive in a collective whose other
// ranks move data (a gatherv's zero block) runs it on the same path as
// they do (host or device; the two must match between neighbours). NULL is
// host.
NamedBuffer named(const void* data, size_t bytes, const char* name) {
  return {data, data ? std::max<size_t>(bytes, 1) : 0, name};
}


}  // namespace

Status Communicator::reduce(const void* send, void* recv, size_t count, int dtype, int op, int root, Launch launch) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_op(op));
  KOLO_RETURN_IF_ERROR(check_root(root, world_.size));
  KOLO_RETURN_IF_ERROR(check_buffer(send, count, "sendbuf"));
  const size_t bytes = count * dtype_size(static_cast<DataType>(dtype));
  const bool is_root = world_.rank == root;
  if (is_root) {
    KOLO_RETURN_IF_ERROR(check_buffer(recv, count, "recvbuf"));
    if (send != recv && ranges_overlap(send, bytes, recv, bytes)) {
      return invalid_argument("sendbuf and recvbuf overlap without being equal");
    }
  }
  void* out = is_root ? recv : nullptr;
  return dispatch("reduce", {named(send, bytes, "sendbuf"), named(out, bytes, "recvbuf")}, std::move(launch),
                  [=](const RingContext& ctx) {
                    return ring_reduce(ctx, send, out, count, static_cast<DataType>(dtype), static_cast<ReduceOp>(op),
                                       root);
                  });
}

Status Communicator::gatherv(const void* send, size_t send_count, void* recv, const std::vector<size_t>& counts,
                             const std::vector<size_t>& displs_or_packed, int dtype, int root, Launch launch) {
  std::vector<size_t> displs;
  size_t extent = 0;
  KOLO_RETURN_IF_ERROR(check_rooted_blocks({dtype, root, world_.rank, world_.size, counts, "recvcounts",
                                            displs_or_packed, send, send_count, "sendbuf", "sendcount", recv,
                                            "recvbuf"},
                                           &displs, &extent));
  const size_t es = dtype_size(static_cast<DataType>(dtype));
  const bool is_root = world_.rank == root;
  void* out = is_root ? recv : nullptr;
  return dispatch("gather", {named(send, send_count * es, "sendbuf"), named(out, extent * es, "recvbuf")},
                  std::move(launch),
                  [=](const RingContext& ctx) {
                    return ring_gather_v(ctx, send, out, counts, displs, static_cast<DataType>(dtype), root);
                  });
}

Status Communicator::scatterv(const void* send, const std::vector<size_t>& counts,
                              const std::vector<size_t>& displs_or_packed, void* recv, size_t recv_count, int dtype,
                              int root, Launch launch) {
  std::vector<size_t> displs;
  size_t extent = 0;
  KOLO_RETURN_IF_ERROR(check_rooted_blocks({dtype, root, world_.rank, world_.size, counts, "sendcounts",
                                            displs_or_packed, recv, recv_count, "recvbuf", "recvcount", send,
                                            "sendbuf"},
                                           &displs, &extent));
  const size_t es = dtype_size(static_cast<DataType>(dtype));
  const bool is_root = world_.rank == root;
  const void* in = is_root ? send : nullptr;
  return dispatch("scatter", {named(in, extent * es, "sendbuf"), named(recv, recv_count * es, "recvbuf")},
                  std::move(launch),
                  [=](const RingContext& ctx) {
                    return ring_scatter_v(ctx, in, recv, counts, displs, static_cast<DataType>(dtype), root);
                  });
}

Status Communicator::allgatherv(const void* send, size_t send_count, void* recv, const std::vector<size_t>& counts,
                                const std::vector<size_t>& displs_or_packed, int dtype, Launch launch) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_counts(counts, world_.size, "recvcounts"));
  if (counts[world_.rank] != send_count) {
    return invalid_argument("sendcount " + std::to_string(send_count) + " differs from recvcounts[" +
                            std::to_string(world_.rank) + "] = " + std::to_string(counts[world_.rank]));
  }
  KOLO_RETURN_IF_ERROR(check_buffer(send, send_count, "sendbuf"));
  const std::vector<size_t> displs = packed_or(displs_or_packed, counts);
  size_t extent = 0;
  KOLO_RETURN_IF_ERROR(check_blocks(counts, displs, world_.size, "displs", &extent));
  KOLO_RETURN_IF_ERROR(check_buffer(recv, extent, "recvbuf"));
  const size_t es = dtype_size(static_cast<DataType>(dtype));
  const void* own = static_cast<const char*>(recv) + displs[world_.rank] * es;
  if (send != own && ranges_overlap(send, send_count * es, recv, extent * es)) {
    return invalid_argument("sendbuf overlaps recvbuf but is not this rank's block of it");
  }
  return dispatch("allgatherv",
                  {named(send, send_count * es, "sendbuf"), named(recv, extent * es, "recvbuf")}, std::move(launch),
                  [=](const RingContext& ctx) {
                    return kolo::allgather(ctx, topology(), thresholds(),
                                           {send, recv, counts, displs, static_cast<DataType>(dtype)});
                  });
}

Status Communicator::reduce_scatterv(const void* send, void* recv, const std::vector<size_t>& counts, int dtype,
                                     int op, Launch launch) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_op(op));
  KOLO_RETURN_IF_ERROR(check_counts(counts, world_.size, "recvcounts"));
  const size_t total = total_of(counts);
  KOLO_RETURN_IF_ERROR(check_buffer(send, total, "sendbuf"));
  KOLO_RETURN_IF_ERROR(check_buffer(recv, counts[world_.rank], "recvbuf"));
  const size_t es = dtype_size(static_cast<DataType>(dtype));
  // Any overlap of recvbuf with sendbuf is fine: ring_reduce_scatter_v then
  // works through scratch.
  return dispatch("reduce_scatterv",
                  {named(send, total * es, "sendbuf"), named(recv, counts[world_.rank] * es, "recvbuf")}, std::move(launch),
                  [=](const RingContext& ctx) {
                    return kolo::reduce_scatter(ctx, topology(), thresholds(),
                                                {send, recv, counts, static_cast<DataType>(dtype),
                                                 static_cast<ReduceOp>(op)});
                  });
}

Status Communicator::alltoallv(const void* send, const std::vector<size_t>& send_counts,
                               const std::vector<size_t>& send_displs_or_packed, void* recv,
                               const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs_or_packed,
                               int dtype, Launch launch) {
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_counts(send_counts, world_.size, "sendcounts"));
  KOLO_RETURN_IF_ERROR(check_counts(recv_counts, world_.size, "recvcounts"));
  const std::vector<size_t> sdispls = packed_or(send_displs_or_packed, send_counts);
  const std::vector<size_t> rdispls = packed_or(recv_displs_or_packed, recv_counts);
  size_t send_extent = 0, recv_extent = 0;
  // Send blocks may share elements (they are only read); receive blocks may not.
  KOLO_RETURN_IF_ERROR(check_blocks(std::vector<size_t>(world_.size, 0), sdispls, world_.size, "sdispls",
                                    &send_extent));
  for (int q = 0; q < world_.size; ++q) send_extent = std::max(send_extent, sdispls[q] + send_counts[q]);
  KOLO_RETURN_IF_ERROR(check_blocks(recv_counts, rdispls, world_.size, "rdispls", &recv_extent));
  if (send_counts[world_.rank] != recv_counts[world_.rank]) {
    return invalid_argument("sendcounts[" + std::to_string(world_.rank) + "] = " +
                            std::to_string(send_counts[world_.rank]) + " differs from recvcounts[" +
                            std::to_string(world_.rank) + "] = " + std::to_string(recv_counts[world_.rank]) +
                            " (this rank's block to itself)");
  }
  KOLO_RETURN_IF_ERROR(check_buffer(send, send_extent, "sendbuf"));
  KOLO_RETURN_IF_ERROR(check_buffer(recv, recv_extent, "recvbuf"));
  const size_t es = dtype_size(static_cast<DataType>(dtype));
  if (ranges_overlap(send, send_extent * es, recv, recv_extent * es)) {
    return invalid_argument("sendbuf and recvbuf overlap (alltoall is not in place)");
  }
  return dispatch("alltoallv",
                  {named(send, send_extent * es, "sendbuf"), named(recv, recv_extent * es, "recvbuf")}, std::move(launch),
                  [=](const RingContext& ctx) {
                    if (!mesh_connected_) {
                      // First over the ring's connections, so that a rank
                      // whose neighbour runs another collective learns it
                      // (MISMATCH) instead of waiting to be connected.
                      KOLO_RETURN_IF_ERROR(ring_fingerprint_exchange(
                          ctx, fingerprint(CollectiveKind::kAlltoall, static_cast<DataType>(dtype), ReduceOp::kSum,
                                           0, 0)));
                    }
                    KOLO_RETURN_IF_ERROR(connect_mesh_once());
                    return pairwise_alltoall_displs(ctx, send, send_counts, sdispls, recv, recv_counts, rdispls,
                                                    static_cast<DataType>(dtype));
                  });
}

// Pairwise alltoall needs every pair connected; a world communicator has
// connected only its ring and recursive-doubling partners. The rest are
// connected here, lazily, on the first alltoall: every rank calls it, so
// both sides of each pair call Transport::connect, in any order (the
// accepting side's listener takes connections in the background), and
// already connected peers (a full-mesh sibling's) are no-ops. Lazily and
// not at creation, because a full mesh costs N-1 connections per rank
// (sockets or queue pairs) that jobs without alltoall never use. Bounded by
// KOLO_TIMEOUT_S like connect_ring; a failure is sticky like any other.
// Under call_mutex_.
Status Communicator::connect_mesh_once() {
  if (mesh_connected_) return Status::ok();
  KOLO_RETURN_IF_ERROR(connect_all());
  mesh_connected_ = true;
  return Status::ok();
}

Status Communicator::send(const void* buf, size_t count, int dtype, int peer) {
  return point_to_point({{PointToPoint::kSend, peer, const_cast<void*>(buf), count, static_cast<DataType>(dtype)}});
}

Status Communicator::recv(void* buf, size_t count, int dtype, int peer) {
  return point_to_point({{PointToPoint::kRecv, peer, buf, count, static_cast<DataType>(dtype)}});
}

Status Communicator::check_point_to_point(const PointToPoint& op) const {
  const bool sending = op.direction == PointToPoint::kSend;
  KOLO_RETURN_IF_ERROR(check_dtype(static_cast<int>(op.dtype)));
  KOLO_RETURN_IF_ERROR(check_buffer(op.data, op.count, sending ? "send buffer" : "receive buffer"));
  if (op.peer < 0 || op.peer >= world_.size) {
    return invalid_argument(std::string(sending ? "send to" : "receive from") + " rank " + std::to_string(op.peer) +
                            ", which is not a rank of a communicator of " + std::to_string(world_.size));
  }
  return Status::ok();
}

Status Communicator::point_to_point(const std::vector<PointToPoint>& ops, Launch launch) {
  std::vector<NamedBuffer> buffers;
  std::vector<int> peers;  // to connect: every peer but this rank, once
  for (const PointToPoint& op : ops) {
    KOLO_RETURN_IF_ERROR(check_point_to_point(op));
    buffers.push_back({op.data, op.count * dtype_size(op.dtype),
                       op.direction == PointToPoint::kSend ? "send buffer" : "receive buffer"});
    if (op.peer != world_.rank && std::find(peers.begin(), peers.end(), op.peer) == peers.end()) {
      peers.push_back(op.peer);
    }
  }
  return dispatch("send/recv", buffers, std::move(launch), [this, ops, peers](const RingContext& ctx) {
    // Connected on first use: both ranks of a pair post to each other, so
    // both connect; the listening side accepts in the background, so the
    // order of the peers does not matter. Through the host transport, which
    // the GPU transports send through.
    if (!peers.empty()) {
      KOLO_RETURN_IF_ERROR(transport_->prepare(peers));
      const Deadline deadline = Deadline::after_seconds(config_.timeout_s);
      for (int peer : peers) KOLO_RETURN_IF_ERROR(transport_->connect(peer, deadline));
    }
    return run_point_to_point(ctx, ops);
  });
}

Status Communicator::recv_any(void* buf, size_t count, int dtype, int* source, Launch launch) {
  if (source == nullptr) return invalid_argument("source output pointer is NULL");
  *source = -1;
  KOLO_RETURN_IF_ERROR(check_dtype(dtype));
  KOLO_RETURN_IF_ERROR(check_buffer(buf, count, "receive buffer"));
  if (world_.size == 1) {
    return invalid_argument("a receive from any rank on a communicator of one rank: no other rank can send to it "
                            "(messages to itself are not taken)");
  }
  std::vector<int> cannot;
  for (int peer = 0; peer < world_.size; ++peer) {
    if (peer != world_.rank && !transport_->can_peek(peer)) cannot.push_back(peer);
  }
  if (!cannot.empty()) {
    return unsupported("a receive from any rank must see a message before receiving it, which the transport to "
                       "rank(s) " + rank_list(cannot, 16) + " cannot (this communicator's transports: " +
                       transport_->name() + "; RDMA moves nothing before the receiver names the buffer, TCP and "
                       "shared memory can: KOLO_TRANSPORT=tcp)");
  }
  const size_t bytes = count * dtype_size(static_cast<DataType>(dtype));
  {
    // Device memory: the GPU transports decide how each message crosses
    // (CUDA IPC is receiver-driven too), so they cannot be looked into.
    std::lock_guard<std::mutex> order(stream_mutex_);
    bool on_device = false;
    KOLO_RETURN_IF_ERROR(gpu()->classify({{buf, bytes, "receive buffer"}}, &on_device));
    if (on_device) return unsupported("a receive from any rank takes host buffers; recvbuf is device memory");
  }
  return dispatch("recv_any", {{buf, bytes, "receive buffer"}}, std::move(launch),
                  [this, buf, count, dtype, source](const RingContext& ctx) {
                    return receive_from_any(ctx, buf, count, static_cast<DataType>(dtype), &any_source_, source);
                  });
}

}  // namespace kolo
