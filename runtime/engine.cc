#include "runtime/engine.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "collectives/elementwise.h"
#include "collectives/fingerprint.h"
#include "collectives/ring_schedule.h"
#include "common/log.h"
#include "transport/gpu_driver.h"

namespace kolo {
namespace {

// The token that starts a round: an empty message with its own tag.
const uint64_t kRoundTag = fingerprint(CollectiveKind::kBarrier, DataType::kUint8, ReduceOp::kMin, 0xfffff, 0);

size_t tensor_bytes(const OpRequest& r, size_t i) {
  return static_cast<size_t>(element_count(r.shapes[i])) * dtype_size(static_cast<DataType>(r.dtype));
}

size_t request_bytes(const OpRequest& r) {
  size_t b = 0;
  for (size_t i = 0; i < r.shapes.size(); ++i) b += tensor_bytes(r, i);
  return b;
}

// dst = src * factor, or a plain copy when the factor is 1.
void copy_scaled(DataType dtype, void* dst, const void* src, size_t count, double factor) {
  if (factor != 1) {
    scale_copy(dtype, dst, src, count, factor);
  } else if (count) {
    std::memcpy(dst, src, count * dtype_size(dtype));
  }
}

std::string ranks_text(const std::vector<int>& ranks) {
  std::string s;
  for (size_t i = 0; i < ranks.size(); ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  return s;
}

}  // namespace

Engine::Engine(Communicator* parent)
    : parent_(parent), config_(parent->config()), rank_(parent->rank()), size_(parent->size()) {}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
    if (comm_) comm_->interrupt();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  timeline_.stop();
}

Status Engine::validate(const Submission& s) const {
  const OpRequest& r = s.request;
  const std::string what = std::string(op_kind_name(r.kind)) + " '" + r.name + "'";
  if (r.name.empty()) return invalid_argument("an operation needs a non-empty name");
  if (r.name.rfind("kolo.", 0) == 0) return invalid_argument("names starting with 'kolo.' are reserved: " + r.name);
  if (!is_user_kind(r.kind)) return invalid_argument("unknown operation kind for '" + r.name + "'");
  if (!valid_dtype(r.dtype)) return invalid_argument(what + ": unknown dtype " + std::to_string(r.dtype));
  const bool reduces = r.kind == OpKind::kAllreduce || r.kind == OpKind::kReduceScatter;
  if (reduces && !valid_op(r.op)) return invalid_argument(what + ": unknown reduction op " + std::to_string(r.op));
  if (!std::isfinite(r.prescale) || !std::isfinite(r.postscale)) {
    return invalid_argument(what + ": scale factors must be finite");
  }
  if (!reduces && (r.prescale != 1 || r.postscale != 1)) {
    return invalid_argument(what + ": scale factors apply to allreduce and reduce_scatter only");
  }
  for (const auto& shape : r.shapes) {
    for (int64_t d : shape) {
      if (d < 0) return invalid_argument(what + ": negative dimension");
    }
  }
  const size_t tensors = r.kind == OpKind::kBarrier ? 0 : r.shapes.size();
  if (r.kind == OpKind::kBarrier && !r.shapes.empty()) return invalid_argument(what + ": a barrier has no tensors");
  if (r.kind != OpKind::kBarrier && r.shapes.empty()) return invalid_argument(what + ": no tensor given");
  if (r.kind != OpKind::kAllreduce && r.shapes.size() > 1) {
    return invalid_argument(what + ": only allreduce takes a group of tensors");
  }
  const bool needs_rows = r.kind == OpKind::kAllgather || r.kind == OpKind::kAlltoall ||
                          r.kind == OpKind::kReduceScatter;
  if (needs_rows && r.shapes[0].empty()) return invalid_argument(what + ": the tensor needs at least one dimension");
  if (r.kind == OpKind::kBroadcast && (r.root < 0 || r.root >= size_)) {
    return invalid_argument(what + ": root " + std::to_string(r.root) + " is not a rank of a world of " +
                            std::to_string(size_));
  }
  if (r.kind == OpKind::kAlltoall) {
    if (r.splits.size() != static_cast<size_t>(size_)) {
      return invalid_argument(what + ": needs one split per rank (" + std::to_string(size_) + "), got " +
                              std::to_string(r.splits.size()));
    }
    int64_t sum = 0;
    for (int64_t x : r.splits) {
      if (x < 0) return invalid_argument(what + ": negative split");
      sum += x;
    }
    if (sum != r.shapes[0][0]) {
      return invalid_argument(what + ": the splits add up to " + std::to_string(sum) + " rows but the tensor has " +
                              std::to_string(r.shapes[0][0]));
    }
  }
  const bool needs_send = r.kind != OpKind::kBroadcast && r.kind != OpKind::kBarrier;
  const bool needs_recv = r.kind == OpKind::kAllreduce || r.kind == OpKind::kBroadcast ||
                          r.kind == OpKind::kReduceScatter;
  if ((needs_send && s.sends.size() != tensors) || (needs_recv && s.recvs.size() != tensors)) {
    return invalid_argument(what + ": one buffer per tensor is needed");
  }
  for (size_t i = 0; i < tensors; ++i) {
    const bool empty = element_count(r.shapes[i]) == 0;
    if (needs_send && !s.sends[i] && !empty) return invalid_argument(what + ": send buffer is NULL");
    if (needs_recv && !s.recvs[i]) {
      const bool recv_empty =
          r.kind == OpKind::kReduceScatter
              ? partition(static_cast<size_t>(r.shapes[0][0]), size_, rank_).count * row_elements(r.shapes[0]) == 0
              : empty;
      if (!recv_empty) return invalid_argument(what + ": receive buffer is NULL");
    }
    // The engine fuses and scales on the host: device tensors go through
    // the synchronous collectives (kolo_allreduce_stream, ...) or are
    // copied to the host first (what kolo.torch does).
    const void* buffers[] = {needs_send ? s.sends[i] : nullptr, needs_recv ? s.recvs[i] : nullptr};
    for (const void* p : buffers) {
      if (p && cuda_driver()->is_device_memory(p)) {
        return unsupported(what + ": named operations take host buffers, and this one is GPU memory");
      }
    }
  }
  return Status::ok();
}

Status Engine::submit(Submission submission, std::shared_ptr<OpHandle>* out) {
  KOLO_RETURN_IF_ERROR(validate(submission));
  auto handle = std::make_shared<OpHandle>();
  const auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    KOLO_RETURN_IF_ERROR(accepting_locked());
    const std::string& name = submission.request.name;
    if (join_pending_) {
      return invalid_usage("'" + name + "' was submitted after this rank joined; submit it after the join completes");
    }
    if (!in_flight_.insert(name).second) {
      return invalid_usage("an operation named '" + name +
                           "' is already in flight on this rank; a name can be reused once its operation completes");
    }
    queue_.push_back(Queued{std::move(submission), handle, now, false});
    start_locked();
    if (comm_) comm_->interrupt();
  }
  wake_.notify_all();
  *out = std::move(handle);
  return Status::ok();
}

Status Engine::accepting_locked() const {
  if (stopped_) return Status(stop_status_.code(), "the engine has stopped: " + stop_status_.message());
  if (stop_requested_) return invalid_usage("the engine is shutting down");
  return Status::ok();
}

Status Engine::join(std::shared_ptr<OpHandle>* out) {
  auto handle = std::make_shared<OpHandle>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    KOLO_RETURN_IF_ERROR(accepting_locked());
    if (join_pending_) return invalid_usage("this rank has already joined");
    join_pending_ = true;
    Queued q{Submission{}, handle, Clock::now(), true};
    queue_.push_back(std::move(q));
    start_locked();
    if (comm_) comm_->interrupt();
  }
  wake_.notify_all();
  *out = std::move(handle);
  return Status::ok();
}

void Engine::start_locked() {
  if (started_) return;
  started_ = true;
  thread_ = std::thread([this] { thread_main(); });
}

Status Engine::start_timeline(const std::string& path) { return timeline_.start(path, rank_); }

void Engine::stop_timeline() { timeline_.stop(); }

void Engine::abort() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_requested_ = true;
  aborted_ = true;
  if (comm_) comm_->abort();
  wake_.notify_all();
}

Status Engine::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_ ? stop_status_ : Status::ok();
}

EngineStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::string Engine::last_stall_report() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_stall_report_;
}

void Engine::thread_main() {
  std::unique_ptr<Communicator> comm;
  Status s = Communicator::create_sibling(parent_, "engine/", /*full_mesh=*/true, &comm);
  if (s.is_ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      comm_ = std::move(comm);
      if (aborted_) comm_->abort();  // an abort that came while connecting
    }
    comm_->attach(&fusion_);
    comm_->attach(&scratch_);
    negotiator_ = std::make_unique<Negotiator>(rank_, size_, static_cast<size_t>(config_.cache_capacity));
    if (!config_.timeline_path.empty() && rank_ == 0) {
      Status t = timeline_.start(config_.timeline_path, rank_);
      if (!t.is_ok()) KOLO_WARN("KOLO_TIMELINE: " << t.message());
    }
    s = run();
  } else {
    s = s.with_context("the engine could not connect to the other ranks");
  }
  stop_all(s);
}

Status Engine::run() {
  for (;;) {
    KOLO_RETURN_IF_ERROR(wait_for_round());
    KOLO_RETURN_IF_ERROR(run_round());
  }
}

void Engine::drain_queue() {
  std::vector<Queued> queued;
  bool stop = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queued.swap(queue_);
    stop = stop_requested_;
  }
  for (auto& q : queued) {
    if (q.join) {
      join_handle_ = q.handle;
      (void)negotiator_->join();  // the submitting side already refused a second join
      continue;
    }
    const std::string name = q.sub.request.name;
    Status s = negotiator_->add_local(q.sub.request, q.submitted);
    if (!s.is_ok()) {  // cannot happen: submit() checked the same
      {
        std::lock_guard<std::mutex> lock(mu_);
        in_flight_.erase(name);
      }
      q.handle->complete(s);
      continue;
    }
    timeline_.instant(name, "SUBMITTED", q.submitted);
    LocalOp op;
    op.sub = std::move(q.sub);
    op.handle = std::move(q.handle);
    op.submitted = q.submitted;
    ops_.emplace(name, std::move(op));
  }
  if (stop && !shutdown_sent_) {
    OpRequest r;
    r.name = "kolo.shutdown";
    r.kind = OpKind::kShutdown;
    negotiator_->add_internal(r);
    shutdown_sent_ = true;
  }
}

Engine::Clock::time_point Engine::next_stall_check() const {
  if (!negotiator_->has_local_pending()) return Clock::time_point::max();
  double period = config_.stall_warning_s;
  if (config_.stall_shutdown_s > 0) period = std::min(period, config_.stall_shutdown_s);
  const auto first = negotiator_->oldest_local() +
                     std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(period));
  // Then every half period, so rank 0 sees the stall soon after it begins.
  const auto again = last_stall_round_ +
                     std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(period / 2));
  return std::max(first, again);
}

Status Engine::wait_for_round() {
  const auto cycle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(config_.cycle_time_ms));
  for (;;) {
    drain_queue();
    const auto now = Clock::now();
    const auto stall_due = next_stall_check();
    if (stall_due <= now) {
      // Pending here for a whole period: send such requests in full so the
      // table (and rank 0's report) sees exactly which ranks lack them.
      negotiator_->expose_older_than(now - std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(config_.stall_warning_s / 2)));
      last_stall_round_ = now;
      return Status::ok();
    }
    const bool news = negotiator_->has_news();
    const auto gate = last_round_start_ + cycle;
    if (news && now >= gate) return Status::ok();
    if (token_posted_ && token_in_.done) return Status::ok();  // a peer started a round
    auto until = std::min(stall_due, now + std::chrono::seconds(3600));
    if (news) until = std::min(until, gate);
    KOLO_RETURN_IF_ERROR(idle_wait(until));
  }
}

Status Engine::post_token_recv(const RingContext& ctx) {
  // Posted once per round, by whichever comes first: the idle wait (so a
  // peer's round wakes this rank) or this rank starting the round itself.
  if (token_posted_) return Status::ok();
  token_in_ = Request();
  KOLO_RETURN_IF_ERROR(ctx.transport->post_recv(ctx.left, nullptr, 0, kRoundTag, &token_in_));
  token_posted_ = true;
  return Status::ok();
}

Status Engine::idle_wait(Clock::time_point until) {
  if (size_ == 1) {
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait_until(lock, until, [&] { return !queue_.empty() || (stop_requested_ && !shutdown_sent_); });
    return Status::ok();
  }
  const Deadline deadline = Deadline::after(until - Clock::now());
  return comm_->run_custom("engine (waiting for work)", [&](const RingContext& ctx) {
    KOLO_RETURN_IF_ERROR(post_token_recv(ctx));
    Status s = ctx.transport->progress(deadline);
    // Waiting for work is not a failure, however long it takes.
    if (s.code() == Code::kTimeout && deadline.expired()) return Status::ok();
    return s;
  });
}

Status Engine::exchange_messages(const std::string& mine, std::vector<std::string>* all) {
  std::vector<uint64_t> lengths(size_);
  const uint64_t my_length = mine.size();
  KOLO_RETURN_IF_ERROR(comm_->allgather(&my_length, lengths.data(), 1, static_cast<int>(DataType::kUint64)));
  const uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::string padded = mine;
  padded.resize(longest);
  std::string gathered(longest * size_, '\0');
  KOLO_RETURN_IF_ERROR(
      comm_->allgather(padded.data(), &gathered[0], longest, static_cast<int>(DataType::kUint8)));
  all->resize(size_);
  for (int q = 0; q < size_; ++q) (*all)[q] = gathered.substr(q * longest, lengths[q]);
  return Status::ok();
}

Status Engine::run_round() {
  const auto start = Clock::now();
  last_round_start_ = start;
  if (size_ > 1) {
    // Pass the token on and wait for it from the left: after this, every
    // rank is in the round.
    KOLO_RETURN_IF_ERROR(comm_->run_custom("engine round start", [&](const RingContext& ctx) {
      KOLO_RETURN_IF_ERROR(post_token_recv(ctx));
      token_out_ = Request();
      KOLO_RETURN_IF_ERROR(ctx.transport->post_send(ctx.right, nullptr, 0, kRoundTag, &token_out_));
      while (!token_in_.done || !token_out_.done) {
        KOLO_RETURN_IF_ERROR(ctx.transport->progress(Deadline::after_seconds(config_.timeout_s)));
      }
      return Status::ok();
    }));
    token_posted_ = false;
  }
  drain_queue();
  RoundContribution mine = negotiator_->begin_round();
  for (auto& entry : ops_) {
    if (entry.second.negotiation_start == Clock::time_point{}) entry.second.negotiation_start = start;
  }
  std::vector<uint8_t> reduced(mine.control.size());
  KOLO_RETURN_IF_ERROR(comm_->allreduce(mine.control.data(), reduced.data(), mine.control.size(),
                                        static_cast<int>(DataType::kUint8), static_cast<int>(ReduceOp::kMin)));
  std::vector<std::string> messages;
  if (reduced[0] == 0) KOLO_RETURN_IF_ERROR(exchange_messages(mine.message, &messages));
  const auto negotiated = Clock::now();
  RoundOutcome outcome;
  KOLO_RETURN_IF_ERROR(negotiator_->finish_round(reduced, messages, negotiated, &outcome));
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.rounds;
    if (!messages.empty()) ++stats_.rounds_with_messages;
    stats_.negotiation_seconds += std::chrono::duration<double>(negotiated - start).count();
    stats_.cache_hits += static_cast<uint64_t>(outcome.cache_hits);
  }
  for (auto& entry : ops_) {
    if (entry.second.announced == Clock::time_point{}) entry.second.announced = negotiated;
  }
  if (timeline_.active()) {
    for (const auto& r : outcome.ready) {
      auto it = ops_.find(r.spec.name);
      if (it == ops_.end()) continue;
      const LocalOp& op = it->second;
      timeline_.phase(r.spec.name, "QUEUED", op.submitted, op.negotiation_start);
      timeline_.phase(r.spec.name, "NEGOTIATING", op.negotiation_start, op.announced);
      if (op.announced < negotiated) timeline_.phase(r.spec.name, "WAITING_FOR_OTHER_RANKS", op.announced, negotiated);
    }
  }
  KOLO_RETURN_IF_ERROR(execute(&outcome.ready));
  if (outcome.join_done && join_handle_) {
    join_handle_->join_last_rank = outcome.last_joined;
    auto h = std::move(join_handle_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      join_pending_ = false;
    }
    h->complete(Status::ok());
  }
  if (!outcome.stall_abort.empty()) return timeout_error(outcome.stall_abort);
  if (outcome.shutdown_rank >= 0) {
    return outcome.shutdown_rank == rank_
               ? invalid_usage("the engine was shut down on this rank")
               : invalid_usage("rank " + std::to_string(outcome.shutdown_rank) + " shut down its engine");
  }
  check_stalls(Clock::now());
  return Status::ok();
}

void Engine::check_stalls(Clock::time_point now) {
  if (rank_ != 0) return;
  const double warn = config_.stall_warning_s;
  std::vector<StalledName> stalled = negotiator_->stalled(now, warn);
  std::string report;
  bool fatal = false;
  for (const auto& s : stalled) {
    if (s.missing.empty()) continue;
    auto last = stall_reported_.find(s.name);
    const bool shutdown = config_.stall_shutdown_s > 0 && s.age_s >= config_.stall_shutdown_s;
    fatal = fatal || shutdown;
    if (!shutdown && last != stall_reported_.end() &&
        std::chrono::duration<double>(now - last->second).count() < warn) {
      continue;
    }
    stall_reported_[s.name] = now;
    char age[32];
    std::snprintf(age, sizeof(age), "%.1f", s.age_s);
    report += (report.empty() ? "" : "; ") + std::string(op_kind_name(s.kind)) + " '" + s.name +
              "' submitted on rank(s) " + ranks_text(s.present) + " but not on rank(s) " + ranks_text(s.missing) +
              " for " + age + " s";
  }
  if (report.empty()) return;
  report = "stalled: " + report;
  KOLO_WARN(report << " (KOLO_STALL_WARNING_S=" << warn << ")");
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_stall_report_ = report;
  }
  if (fatal) {
    OpRequest abort_request;
    abort_request.kind = OpKind::kStallAbort;
    std::ostringstream limit;
    limit << config_.stall_shutdown_s;
    abort_request.name = report + " (longer than KOLO_STALL_SHUTDOWN_S=" + limit.str() + " s)";
    negotiator_->add_internal(abort_request);
  }
  for (auto it = stall_reported_.begin(); it != stall_reported_.end();) {  // forget finished names
    bool still = std::any_of(stalled.begin(), stalled.end(), [&](const StalledName& s) { return s.name == it->first; });
    it = still ? std::next(it) : stall_reported_.erase(it);
  }
}

void* Engine::scratch(size_t bytes) { return scratch_.get(bytes); }

void* Engine::identity(size_t bytes) {
  if (identity_.size() < bytes) identity_.resize(bytes);
  return identity_.data();
}

void Engine::finish_op(const std::string& name, Status status) {
  auto it = ops_.find(name);
  if (it == ops_.end()) return;
  std::shared_ptr<OpHandle> handle = std::move(it->second.handle);
  ops_.erase(it);
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.erase(name);
    ++stats_.operations;
  }
  timeline_.instant(name, status.is_ok() ? "DONE" : "FAILED", Clock::now());
  handle->complete(std::move(status));
}

Status Engine::execute(std::vector<OpResponse>* ready) {
  std::vector<bool> done(ready->size(), false);
  const size_t threshold = static_cast<size_t>(config_.fusion_threshold_bytes);
  for (size_t i = 0; i < ready->size(); ++i) {
    if (done[i]) continue;
    const OpResponse& r = (*ready)[i];
    done[i] = true;
    if (!r.error.is_ok()) {
      finish_op(r.spec.name, r.error);
      continue;
    }
    if (r.spec.kind != OpKind::kAllreduce) {
      auto it = ops_.find(r.spec.name);
      KOLO_RETURN_IF_ERROR(run_single(r, it == ops_.end() ? nullptr : &it->second));
      finish_op(r.spec.name, Status::ok());
      continue;
    }
    // Greedy fusion in the agreed order: later allreduces of the same dtype
    // and op join this one while the buffer has room.
    std::vector<const OpResponse*> batch{&r};
    size_t bytes = request_bytes(r.spec);
    for (size_t j = i + 1; j < ready->size() && bytes < threshold; ++j) {
      const OpResponse& o = (*ready)[j];
      if (done[j] || !o.error.is_ok() || o.spec.kind != OpKind::kAllreduce || o.spec.dtype != r.spec.dtype ||
          o.spec.op != r.spec.op) {
        continue;
      }
      const size_t b = request_bytes(o.spec);
      if (bytes + b > threshold) continue;
      batch.push_back(&o);
      bytes += b;
      done[j] = true;
    }
    KOLO_RETURN_IF_ERROR(run_allreduce_batch(batch));
    for (const OpResponse* m : batch) finish_op(m->spec.name, Status::ok());
  }
  return Status::ok();
}

Status Engine::run_allreduce_batch(const std::vector<const OpResponse*>& batch) {
  const OpRequest& first = batch[0]->spec;
  const auto dtype = static_cast<DataType>(first.dtype);
  const auto op = static_cast<ReduceOp>(first.op);
  const size_t es = dtype_size(dtype);
  const bool tracing = timeline_.active();
  std::chrono::steady_clock::time_point rs_done{};
  comm_->set_reduce_scatter_mark(tracing ? &rs_done : nullptr);

  auto trace_ring = [&](const std::vector<std::string>& names, Clock::time_point begin, Clock::time_point end) {
    if (!tracing) return;
    for (const auto& n : names) {
      if (rs_done == Clock::time_point{}) {
        timeline_.phase(n, "ALLREDUCE", begin, end);  // small: recursive doubling, no ring phases
      } else {
        timeline_.phase(n, "RING_REDUCE_SCATTER", begin, rs_done);
        timeline_.phase(n, "RING_ALLGATHER", rs_done, end);
      }
    }
  };

  // One tensor alone: straight on the caller's buffers (no copies).
  if (batch.size() == 1 && first.shapes.size() == 1) {
    auto it = ops_.find(first.name);
    const size_t count = static_cast<size_t>(element_count(first.shapes[0]));
    const void* send;
    void* recv;
    if (it != ops_.end()) {
      send = it->second.sub.sends[0];
      recv = it->second.sub.recvs[0];
      if (first.prescale != 1) {
        scale_copy(dtype, recv, send, count, first.prescale);
        send = recv;
      }
    } else {  // joined: contribute the identity
      recv = identity(count * es);
      fill_identity(dtype, op, recv, count);
      send = recv;
    }
    const auto begin = Clock::now();
    Status s = comm_->allreduce(send, recv, count, first.dtype, first.op);
    comm_->set_reduce_scatter_mark(nullptr);
    KOLO_RETURN_IF_ERROR(s);
    trace_ring({first.name}, begin, Clock::now());
    if (it != ops_.end() && first.postscale != 1) scale_copy(dtype, recv, recv, count, first.postscale);
    return Status::ok();
  }

  // Zero-copy fusion: the batch is one logical buffer, the concatenation of
  // its tensors, reduced in one ring pass over spans that point into the
  // tensors themselves. Only runs of small tensors (under kCopyBelow bytes)
  // are packed into the fusion buffer, where a copy costs less than the
  // extra messages they would cut the ring into. Span boundaries depend only
  // on the agreed shapes, so they are the same on every rank.
  constexpr size_t kCopyBelow = 64 << 10;
  struct Piece {
    const OpResponse* member;
    size_t tensor;
    size_t count;
    bool packed;
  };
  std::vector<Piece> pieces;
  size_t packed_bytes = 0;
  for (const OpResponse* m : batch) {
    for (size_t t = 0; t < m->spec.shapes.size(); ++t) {
      const size_t count = static_cast<size_t>(element_count(m->spec.shapes[t]));
      const bool packed = count * es < kCopyBelow;
      pieces.push_back({m, t, count, packed});
      packed_bytes += count * es;  // a joined rank packs everything
    }
  }
  fusion_.get(packed_bytes);
  std::vector<std::string> names;
  for (const OpResponse* m : batch) names.push_back(m->spec.name);
  const auto copy_in_start = Clock::now();
  std::vector<Span> spans;
  bool last_packed = false;
  size_t offset = 0;  // in fusion_
  for (const Piece& pc : pieces) {
    auto it = ops_.find(pc.member->spec.name);
    const double pre = pc.member->spec.prescale;
    unsigned char* slot = fusion_.data() + offset;
    Span span;
    if (it == ops_.end()) {  // joined: the op's identity, all in the fusion buffer
      fill_identity(dtype, op, slot, pc.count);
      span = {slot, slot, pc.count};
      offset += pc.count * es;
    } else if (pc.packed) {
      copy_scaled(dtype, slot, it->second.sub.sends[pc.tensor], pc.count, pre);
      span = {slot, slot, pc.count};
      offset += pc.count * es;
    } else {
      const void* src = it->second.sub.sends[pc.tensor];
      void* dst = it->second.sub.recvs[pc.tensor];
      if (pre != 1) {
        scale_copy(dtype, dst, src, pc.count, pre);
        src = dst;
      }
      span = {src, dst, pc.count};
    }
    // Neighbouring small tensors make one span (by the size rule alone, not
    // by where this rank keeps them: a joined rank keeps everything packed).
    if (pc.packed && last_packed) {
      spans.back().count += span.count;
    } else {
      spans.push_back(span);
    }
    last_packed = pc.packed;
  }
  const auto copied_in = Clock::now();
  Status s = comm_->allreduce_spans(spans, first.dtype, first.op);
  comm_->set_reduce_scatter_mark(nullptr);
  KOLO_RETURN_IF_ERROR(s);
  const auto reduced = Clock::now();
  offset = 0;
  for (const Piece& pc : pieces) {
    auto it = ops_.find(pc.member->spec.name);
    const double post = pc.member->spec.postscale;
    if (it == ops_.end()) {
      offset += pc.count * es;
      continue;
    }
    void* dst = it->second.sub.recvs[pc.tensor];
    if (pc.packed) {
      copy_scaled(dtype, dst, fusion_.data() + offset, pc.count, post);
      offset += pc.count * es;
    } else if (post != 1) {
      scale_copy(dtype, dst, dst, pc.count, post);
    }
  }
  if (batch.size() > 1) {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.fused_batches;
  }
  if (tracing) {
    const auto copied_out = Clock::now();
    for (const auto& n : names) timeline_.phase(n, "MEMCPY_IN_FUSION_BUFFER", copy_in_start, copied_in);
    trace_ring(names, copied_in, reduced);
    for (const auto& n : names) timeline_.phase(n, "MEMCPY_OUT_FUSION_BUFFER", reduced, copied_out);
  }
  return Status::ok();
}

Status Engine::run_single(const OpResponse& r, LocalOp* op) {
  const OpRequest& q = r.spec;
  const auto dtype = static_cast<DataType>(q.dtype);
  const size_t es = dtype_size(dtype);
  const auto begin = Clock::now();
  const char* phase = "";
  switch (q.kind) {
    case OpKind::kBarrier:
      phase = "BARRIER";
      KOLO_RETURN_IF_ERROR(comm_->barrier());
      break;
    case OpKind::kBroadcast: {
      phase = "BROADCAST";
      const size_t count = static_cast<size_t>(element_count(q.shapes[0]));
      void* buf = op ? op->sub.recvs[0] : scratch(count * es);
      KOLO_RETURN_IF_ERROR(comm_->broadcast(buf, count, q.dtype, q.root));
      break;
    }
    case OpKind::kAllgather: {
      phase = "ALLGATHER";
      const size_t row = static_cast<size_t>(row_elements(q.shapes[0]));
      std::vector<size_t> counts(size_);
      size_t total = 0;
      for (int p = 0; p < size_; ++p) total += counts[p] = static_cast<size_t>(r.rows[p]) * row;
      std::vector<unsigned char> out(total * es);
      KOLO_RETURN_IF_ERROR(comm_->allgather_v(op ? op->sub.sends[0] : nullptr, out.data(), counts, q.dtype));
      if (op) {
        op->handle->output = std::move(out);
        op->handle->output_rows = r.rows;
      }
      break;
    }
    case OpKind::kReduceScatter: {
      phase = "REDUCE_SCATTER";
      const size_t rows = static_cast<size_t>(q.shapes[0][0]);
      const size_t row = static_cast<size_t>(row_elements(q.shapes[0]));
      std::vector<size_t> counts(size_);
      for (int p = 0; p < size_; ++p) counts[p] = partition(rows, size_, p).count * row;
      const size_t total = rows * row;
      const auto red = static_cast<ReduceOp>(q.op);
      const void* send;
      void* recv = op ? op->sub.recvs[0] : nullptr;
      if (!op) {
        void* ident = identity(total * es);
        fill_identity(dtype, red, ident, total);
        send = ident;
        recv = scratch(counts[rank_] * es);
      } else if (q.prescale != 1) {
        void* scaled = scratch(total * es);
        scale_copy(dtype, scaled, op->sub.sends[0], total, q.prescale);
        send = scaled;
      } else {
        send = op->sub.sends[0];
      }
      if (!recv) recv = empty_;  // nothing lands here (this rank's part has no rows)
      KOLO_RETURN_IF_ERROR(comm_->reduce_scatter_v(send, recv, counts, q.dtype, q.op));
      if (op && q.postscale != 1) scale_copy(dtype, recv, recv, counts[rank_], q.postscale);
      break;
    }
    case OpKind::kAlltoall: {
      phase = "ALLTOALL";
      const size_t row = static_cast<size_t>(row_elements(q.shapes[0]));
      std::vector<size_t> send_counts(size_), recv_counts(size_);
      std::vector<int64_t> recv_rows(size_);
      size_t total = 0;
      for (int p = 0; p < size_; ++p) {
        send_counts[p] = static_cast<size_t>(r.rows[rank_ * size_ + p]) * row;
        recv_rows[p] = r.rows[p * size_ + rank_];
        total += recv_counts[p] = static_cast<size_t>(recv_rows[p]) * row;
      }
      std::vector<unsigned char> out(total * es);
      KOLO_RETURN_IF_ERROR(
          comm_->alltoall(op ? op->sub.sends[0] : nullptr, send_counts, out.data(), recv_counts, q.dtype));
      if (op) {
        op->handle->output = std::move(out);
        op->handle->output_rows = std::move(recv_rows);
      }
      break;
    }
    default:
      return internal_error("engine: cannot run a " + std::string(op_kind_name(q.kind)));
  }
  timeline_.phase(q.name, phase, begin, Clock::now());
  return Status::ok();
}

void Engine::stop_all(Status status) {
  std::vector<Queued> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    stop_status_ = status;
    queued.swap(queue_);
    in_flight_.clear();
    join_pending_ = false;
  }
  if (status.code() != Code::kInvalidUsage) KOLO_ERROR("engine stopped: " << status.message());
  for (auto& entry : ops_) entry.second.handle->complete(status);
  ops_.clear();
  for (auto& q : queued) q.handle->complete(status);
  if (join_handle_) join_handle_->complete(status);
  join_handle_.reset();
}

}  // namespace kolo
