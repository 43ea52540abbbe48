// A communicator's failures: run() turns a collective's failure sticky
// (sticky_error.h); fail() reconciles it with the job's first failure and
// ends the connections so the neighbours learn at once; abort() and
// async_error() for other threads.
#include "common/log.h"
#include "runtime/communicator.h"

namespace kolo {

Status Communicator::check_healthy() const { return sticky_.check(); }

Status Communicator::async_error() const { return sticky_.get(); }

Status Communicator::fail(Status local) {
  Status final = local;
  if (world_.store && world_.size > 1) {
    final = reconcile_with_first_failure(world_.store.get(), world_.rank, local, config_.timeout_s, &recorder_);
  }
  final = sticky_.keep(final);
  if (world_.rendezvous) world_.rendezvous->mark_failed();
  if (wiring_.transport) wiring_.transport->abort();
  if (wiring_.arena) wiring_.arena->abort();
  if (wiring_.host_arena) wiring_.host_arena->abort();
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
  if (wiring_.transport) wiring_.transport->interrupt();
}

void Communicator::cancel_store_waits(const Status& why) {
  if (world_.store) world_.store->cancel(why);
}

void Communicator::abort() {
  if (sticky_.failed()) return;
  // The resulting error is kept as the sticky one; calls report it.
  Status why = aborted("rank " + std::to_string(world_.rank) + " aborted its communicator (kolo_comm_abort)");
  cancel_store_waits(why);
  (void)fail(why);
}

void Communicator::revoke() {
  if (sticky_.failed()) return;
  Status why = revoked("rank " + std::to_string(world_.rank) + " revoked the communicator" + world_.description +
                       " (kolo_comm_revoke)");
  cancel_store_waits(why);
  (void)fail(why);
}

// The checks of the collectives below (kolo.h's kolo_reduce .. kolo_alltoallv).

}  // namespace kolo
