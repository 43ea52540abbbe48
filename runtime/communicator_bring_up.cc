// The ways a communicator is made (a world from the launcher's
// environment, an explicit master or a caller's store; a sibling; a
// split), each ending in bring_up (bring_up.h does the work: meeting the
// others, for a world; then transports, connections and arenas).
#include <algorithm>
#include <string>
#include <vector>

#include "collectives/fingerprint.h"
#include "common/log.h"
#include "runtime/bring_up.h"
#include "runtime/communicator.h"
#include "transport/handshake.h"

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
  KOLO_RETURN_IF_ERROR(meet(config_, local_rank, local_size, &world_, &opened));
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
    return gpu->adapt(ctx, wiring_.transport.get(), wiring_.device_routes, config_);
  };
  hooks.prepare = [this](GpuContext* gpu, size_t largest) {
    return gpu->prepare(wiring_.transport.get(), wiring_.device_routes, config_, wiring_.pacing.segment_bytes,
                        largest);
  };
  hooks.fail = [this](const Status& why) { (void)fail(why); };
  launcher_ = std::make_unique<CallLauncher>(config_.device, world_.device_local_rank, config_.timeout_s,
                                             std::move(hooks));
  BringUpPlan plan;
  plan.store_prefix = store_prefix;
  plan.full_mesh = full_mesh;
  plan.opened = std::move(opened);
  KOLO_RETURN_IF_ERROR(kolo::bring_up(config_, thresholds_, world_, std::move(plan), &wiring_));
  host_memory_.attach(wiring_.transport.get());
  if (store_prefix.empty() && world_.rank == 0 && world_.size > 1) {
    KOLO_INFO(describe_choices(wiring_, world_, config_, thresholds_));
  }
  // The engine's siblings (a prefix of their own) record their own rounds,
  // but only communicators the caller made answer SIGUSR1.
  if (store_prefix.empty()) listen_for_dump_signal();
  return Status::ok();
}

}  // namespace kolo
