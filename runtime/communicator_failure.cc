// A communicator's failures: run() turns a collective's failure sticky;
// fail() reconciles it with the job's first failure (the store's failure
// record) and ends the connections so the neighbours learn at once;
// abort() and async_error() for other threads.
#include <algorithm>

#include "common/log.h"
#include "runtime/communicator.h"
#include "runtime/failure_record.h"

namespace kolo {

Status Communicator::check_healthy() const {
  if (!failed_.load()) return Status::ok();
  std::lock_guard<std::mutex> lock(error_mutex_);
  return Status(sticky_.code(), "communicator failed earlier: " + sticky_.message());
}

Status Communicator::async_error() const {
  std::lock_guard<std::mutex> lock(error_mutex_);
  return sticky_;
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
    recorder_.report_started();
    Status st = world_.store->set_if_absent(kFailureKey, mine, Deadline::after_seconds(std::min(config_.timeout_s, 2.0)),
                                      &first);
    FailureRecord root;
    const bool decoded = st.is_ok() && decode_failure(first, &root).is_ok();
    recorder_.report_finished(st.is_ok(), decoded ? root.rank : -1);
    if (st.is_ok() && first != mine && decoded && root.rank != world_.rank) {
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
  if (host_arena_) host_arena_->abort();
  if (!config_.flight_recorder_dir.empty()) {
    // Every communicator of this process, then this one with its reason.
    FlightRecorderRegistry::dump_all("another communicator of this process failed: " + final.to_string());
    dump_if_asked(final.to_string());
  }
  return final;
}

FlightRecorder::Identity Communicator::identity() const {
  FlightRecorder::Identity who;
  who.job = world_.job_name;
  who.communicator = world_.store_path.empty() ? "world" : world_.store_path.substr(0, world_.store_path.size() - 1);
  if (!sibling_prefix_.empty()) who.communicator += "+" + sibling_prefix_.substr(0, sibling_prefix_.size() - 1);
  who.rank = world_.rank;
  who.size = world_.size;
  who.host = world_.facts.empty() ? local_host(config_.host_name) : world_.facts[world_.rank].host;
  return who;
}

Status Communicator::dump_flight_record(const std::string& path, const std::string& reason) {
  if (path.empty() && config_.flight_recorder_dir.empty()) {
    return invalid_usage("no path given and KOLO_FLIGHT_RECORDER_DIR is unset: nowhere to write the flight record");
  }
  const FlightRecorder::Identity who = identity();
  const std::string where = path.empty() ? flight_record_path(config_.flight_recorder_dir, who) : path;
  return write_file_atomically(where, recorder_.to_json(who, reason));
}

void Communicator::dump_if_asked(const std::string& reason) {
  if (config_.flight_recorder_dir.empty()) return;
  Status s = dump_flight_record("", reason);
  if (!s.is_ok()) KOLO_WARN("flight record not written: " << s.message());
}

void Communicator::listen_for_dump_signal() {
  if (config_.flight_recorder_dir.empty() || dump_signal_id_) return;
  dump_signal_id_ = FlightRecorderRegistry::add([this](const std::string& reason) { dump_if_asked(reason); });
}

Status Communicator::run(const CallRecord& call, CollectiveRef fn) {
  std::lock_guard<std::mutex> lock(call_mutex_);
  KOLO_RETURN_IF_ERROR(check_healthy());
  const uint64_t sequence = recorder_.begin(call);
  Status s = fn(schedule_context());
  recorder_.end(sequence, s);
  if (s.is_ok()) return s;
  s = fail(s.with_context(std::string(call.what) + " on rank " + std::to_string(world_.rank) + world_.description));
  KOLO_ERROR(s.message());
  return s;
}


void Communicator::interrupt() {
  if (transport_) transport_->interrupt();
}

void Communicator::cancel_store_waits(const Status& why) {
  if (world_.store) world_.store->cancel(why);
}

void Communicator::abort() {
  if (failed_.load()) return;
  // The resulting error is kept as the sticky one; calls report it.
  Status why = aborted("rank " + std::to_string(world_.rank) + " aborted its communicator (kolo_comm_abort)");
  cancel_store_waits(why);
  (void)fail(why);
}

void Communicator::revoke() {
  if (failed_.load()) return;
  Status why = revoked("rank " + std::to_string(world_.rank) + " revoked the communicator" + world_.description +
                       " (kolo_comm_revoke)");
  cancel_store_waits(why);
  (void)fail(why);
}

// The checks of the collectives below (kolo.h's kolo_reduce .. kolo_alltoallv).

}  // namespace kolo
