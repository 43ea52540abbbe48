#include "runtime/engine.h"

#include <algorithm>

#include "common/log.h"
#include "runtime/fusion_plan.h"

namespace kolo {

Engine::Engine(const Config& config, int rank, int size, EngineConnector connector)
    : config_(config),
      connector_(std::move(connector)),
      rank_(rank),
      size_(size),
      stalls_(config_.stall_warning_s, config_.stall_shutdown_s) {}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
    if (link_) link_->interrupt();
    cancel_connect_locked(aborted("the communicator was destroyed while its engine was connecting"));
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  timeline_.stop();
}

Status Engine::submit(Submission submission, std::shared_ptr<OpHandle>* out) {
  KOLO_RETURN_IF_ERROR(validate_submission(submission, rank_, size_));
  if (connector_.classify) {
    Status s = connector_.classify(submission, &submission.request.on_device);
    if (!s.is_ok()) {
      return s.with_context(std::string(op_kind_name(submission.request.kind)) + " '" + submission.request.name + "'");
    }
  }
  KOLO_RETURN_IF_ERROR(check_placement(submission.request));
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
    if (link_) link_->interrupt();
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
    if (link_) link_->interrupt();
  }
  wake_.notify_all();
  *out = std::move(handle);
  return Status::ok();
}

void Engine::cancel_connect_locked(const Status& why) {
  // Still connecting (a peer may never start its engine): stop waiting for it.
  if (started_ && !link_) connector_.cancel(why);
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
  if (link_) link_->abort();
  cancel_connect_locked(aborted("the engine was aborted while connecting"));
  wake_.notify_all();
}

void Engine::revoke() {
  std::lock_guard<std::mutex> lock(mu_);
  stop_requested_ = true;
  aborted_ = true;
  revoked_ = true;
  if (link_) link_->revoke();
  cancel_connect_locked(revoked("the communicator was revoked while its engine was connecting"));
  wake_.notify_all();
}

Status Engine::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopped_ && !stopped_by_shutdown_ ? stop_status_ : Status::ok();
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
  std::unique_ptr<EngineLink> link;
  Status s = connector_.connect(&link);
  if (s.is_ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      link_ = std::move(link);
      if (revoked_) {  // an abort or revoke that came while connecting
        link_->revoke();
      } else if (aborted_) {
        link_->abort();
      }
    }
    link_->attach(&fusion_);
    link_->attach(&scratch_);
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

Status Engine::wait_for_round() {
  const auto cycle = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(config_.cycle_time_ms));
  for (;;) {
    drain_queue();
    const auto now = Clock::now();
    const auto stall_due = stalls_.next_check(*negotiator_);
    if (stall_due <= now) {
      // Pending here for a whole period: send such requests in full so the
      // table (and rank 0's report) sees exactly which ranks lack them.
      stalls_.begin_check_round(negotiator_.get(), now);
      return Status::ok();
    }
    const bool news = negotiator_->has_news();
    const auto gate = last_round_start_ + cycle;
    if (news && now >= gate) return Status::ok();
    if (peer_started_round_) return Status::ok();
    auto until = std::min(stall_due, now + std::chrono::seconds(3600));
    if (news) until = std::min(until, gate);
    KOLO_RETURN_IF_ERROR(idle_wait(until));
  }
}

Status Engine::idle_wait(Clock::time_point until) {
  if (size_ == 1) {
    std::unique_lock<std::mutex> lock(mu_);
    wake_.wait_until(lock, until, [&] { return !queue_.empty() || (stop_requested_ && !shutdown_sent_); });
    return Status::ok();
  }
  return link_->await_round(Deadline::after(until - Clock::now()), &peer_started_round_);
}

Status Engine::exchange_messages(const std::string& mine, std::vector<std::string>* all) {
  std::vector<uint64_t> lengths(size_);
  const uint64_t my_length = mine.size();
  KOLO_RETURN_IF_ERROR(link_->allgather(&my_length, lengths.data(), 1, DataType::kUint64));
  const uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::string padded = mine;
  padded.resize(longest);
  std::string gathered(longest * size_, '\0');
  KOLO_RETURN_IF_ERROR(
      link_->allgather(padded.data(), &gathered[0], longest, DataType::kUint8));
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
    KOLO_RETURN_IF_ERROR(link_->start_round());
    peer_started_round_ = false;
  }
  drain_queue();
  RoundContribution mine = negotiator_->begin_round();
  for (auto& entry : ops_) {
    if (entry.second.negotiation_start == Clock::time_point{}) entry.second.negotiation_start = start;
  }
  std::vector<uint8_t> reduced(mine.control.size());
  KOLO_RETURN_IF_ERROR(link_->allreduce(mine.control.data(), reduced.data(), mine.control.size(),
                                        DataType::kUint8, ReduceOp::kMin, WireFormat::kNative, nullptr));
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
  KOLO_RETURN_IF_ERROR(execute(outcome.ready));
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
    ended_by_shutdown_ = true;
    // Another rank's shutdown is a peer lost to this engine (it finished,
    // or failed and is leaving): Horovod's elastic jobs reset on it, as on
    // Horovod's own "Horovod has been shut down".
    return outcome.shutdown_rank == rank_
               ? invalid_usage("the engine was shut down on this rank")
               : peer_lost("rank " + std::to_string(outcome.shutdown_rank) +
                           " shut down its engine (it finished, or failed and is leaving)");
  }
  report_stalls(Clock::now());
  return Status::ok();
}

void Engine::report_stalls(Clock::time_point now) {
  if (rank_ != 0) return;
  const std::string report = stalls_.inspect(negotiator_.get(), now);
  if (report.empty()) return;
  KOLO_WARN(report << " (KOLO_STALL_WARNING_S=" << config_.stall_warning_s << ")");
  std::lock_guard<std::mutex> lock(mu_);
  last_stall_report_ = report;
}

Participation Engine::participation(const std::string& name) {
  auto it = ops_.find(name);
  if (it == ops_.end()) return {};
  return {&it->second.sub, it->second.handle.get()};
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

Status Engine::execute(const std::vector<OpResponse>& ready) {
  OpResources res;
  res.link = link_.get();
  res.rank = rank_;
  res.size = size_;
  res.small_allreduce_bytes = static_cast<size_t>(config_.small_allreduce_bytes);
  res.fusion = &fusion_;
  res.scratch = &scratch_;
  res.identity = &identity_;
  res.timeline = &timeline_;
  res.residuals = &residuals_;
  for (const std::vector<size_t>& group : plan_fusion(ready, static_cast<size_t>(config_.fusion_threshold_bytes))) {
    const OpResponse& first = ready[group[0]];
    if (!first.error.is_ok()) {
      finish_op(first.spec.name, first.error);
      continue;
    }
    if (first.spec.kind != OpKind::kAllreduce) {
      KOLO_RETURN_IF_ERROR(run_collective(res, first, participation(first.spec.name)));
      finish_op(first.spec.name, Status::ok());
      continue;
    }
    std::vector<const OpRequest*> specs;
    std::vector<Participation> parts;
    for (size_t i : group) {
      specs.push_back(&ready[i].spec);
      parts.push_back(participation(ready[i].spec.name));
    }
    KOLO_RETURN_IF_ERROR(run_allreduce_batch(res, specs, parts));
    if (group.size() > 1) {
      std::lock_guard<std::mutex> lock(mu_);
      ++stats_.fused_batches;
    }
    for (const OpRequest* spec : specs) finish_op(spec->name, Status::ok());
  }
  return Status::ok();
}

void Engine::stop_all(Status status) {
  std::vector<Queued> queued;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopped_ = true;
    stopped_by_shutdown_ = ended_by_shutdown_;
    stop_status_ = status;
    queued.swap(queue_);
    in_flight_.clear();
    join_pending_ = false;
  }
  // A shutdown (this rank's or another's: the job finishing, or a rank
  // leaving) is no error to log; what fails because of it says so.
  if (!ended_by_shutdown_ && status.code() != Code::kInvalidUsage) KOLO_ERROR("engine stopped: " << status.message());
  for (auto& entry : ops_) entry.second.handle->complete(status);
  ops_.clear();
  for (auto& q : queued) q.handle->complete(status);
  if (join_handle_) join_handle_->complete(status);
  join_handle_.reset();
}

}  // namespace kolo
