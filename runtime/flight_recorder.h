// A communicator's flight recorder: its last K calls in a ring buffer
// (sequence number, what, dtype, op, count, root, state, times, the error
// that ended one), dumped to a file per rank when the communicator fails
// (timeout, abort, revoke, a lost peer, a mismatch), on SIGUSR1, and on
// request (kolo_comm_dump_flight_record). tools/kolo-doctor reads every
// rank's dump and says what went wrong: the rank that never arrived, the
// one that called something else, the straggler.
//
// Every rank calls a communicator's collectives in the same order, so the
// sequence numbers line up across ranks: call #k on one rank is call #k on
// the others, and a difference in what they are is the culprit's mark.
// Recording costs two stamps per call (common/stamp_clock.h) and no lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "collectives/dtype.h"
#include "common/stamp_clock.h"
#include "common/status.h"

namespace kolo {

// A call as the recorder keeps it: the C API's name and the arguments that
// must agree across ranks (-1: the call has none).
struct CallRecord {
  const char* what = "";
  int dtype = -1;
  int op = -1;
  int64_t count = -1;  // elements, as the call counts them (per rank where it says so)
  int root = -1;       // a rooted call's root

  CallRecord(const char* w) : what(w) {}  // NOLINT: a bare name is a call with no arguments to agree on
  CallRecord(const char* w, DataType d) : what(w), dtype(static_cast<int>(d)) {}
  CallRecord(const char* w, DataType d, size_t c, int r = -1)
      : what(w), dtype(static_cast<int>(d)), count(static_cast<int64_t>(c)), root(r) {}
  CallRecord(const char* w, DataType d, size_t c, ReduceOp o, int r = -1)
      : what(w), dtype(static_cast<int>(d)), op(static_cast<int>(o)), count(static_cast<int64_t>(c)), root(r) {}
};

class FlightRecorder {
 public:
  // entries: K (0 records nothing).
  explicit FlightRecorder(size_t entries);

  // The call starts now; returns its sequence number (from 0). The calls
  // of one recorder come one at a time (the communicator's call lock): the
  // call that ends is the one begun last.
  uint64_t begin(const CallRecord& call);
  // It ended, with `result`.
  void end(uint64_t sequence, const Status& result);

  // The communicator's failure being reported to the job's store (the
  // record of the job's first failure, on rank 0): started, then whether
  // the store answered. A failure whose report never reached the store,
  // while the other ranks' did, marks a rank cut off from rank 0's side of
  // the network: a partition (tools/kolo-doctor).
  void report_started();
  void report_finished(bool reached, int first_failure_rank);

  // Who is recording, for the dump's header.
  struct Identity {
    std::string job;
    std::string communicator;  // "world", or the split's, shrink's or grow's name
    int rank = 0;
    int size = 1;
    std::string host;
  };
  // The dump as JSON (tools/kolo-doctor's input; docs/failures.md has the
  // format): the identity, why, and the entries oldest first.
  std::string to_json(const Identity& who, const std::string& reason) const;

 private:
  // One call. The calls are recorded without a lock: a dump may read an
  // entry while the communicator's thread writes it, so every field is an
  // atomic, and `version` (odd while a write is under way) tells a dump
  // whether what it read is one state of the entry (a seqlock). Only the
  // error text, set when a call fails and cleared when its slot is reused,
  // takes mu_, inside the write like every other field.
  struct Entry {
    enum State : uint8_t { kStarted, kCompleted, kFailed };
    std::atomic<uint64_t> version{0};
    std::atomic<uint64_t> sequence{0};
    std::atomic<const char*> what{""};
    std::atomic<int> dtype{-1}, op{-1}, root{-1};
    std::atomic<int64_t> count{-1};
    std::atomic<uint8_t> state{kStarted};
    // Stamps (clock_), 0 for none: wall clock (CLOCK_REALTIME) in the dump,
    // comparable across the ranks of a machine.
    std::atomic<uint64_t> start{0};
    std::atomic<uint64_t> end{0};
    std::string error;  // mu_
  };
  // An entry as one consistent read of it.
  struct Snapshot {
    uint64_t sequence;
    CallRecord call{""};
    uint8_t state;
    uint64_t start, end;
    std::string error;
  };
  static void open_write(Entry& e);
  static void close_write(Entry& e);
  // False if the entry kept changing under the read (a call beginning or
  // ending all along).
  bool read(const Entry& e, Snapshot* out) const;

  struct Report {
    enum State : uint8_t { kNone, kPending, kReached, kUnreachable } state = kNone;
    int64_t started_ns = 0;
    int64_t finished_ns = 0;
    int first_failure_rank = -1;
  };
  mutable std::mutex mu_;  // report_ and the entries' error text
  const StampClock clock_;
  std::vector<Entry> ring_;
  // Written by the communicator's calls, one at a time (its call lock);
  // read by dumps.
  std::atomic<uint64_t> next_{0};  // sequence of the next call
  size_t next_slot_ = 0;           // its entry in ring_
  size_t last_slot_ = 0;           // the entry of the call begun last
  Report report_;
};

// Where a rank's dump goes: DIR/kolo-flight.<job>.<communicator>.rank<R>.json,
// every character outside [A-Za-z0-9._-] of job and communicator as '_'.
std::string flight_record_path(const std::string& dir, const FlightRecorder::Identity& who);

// Writes `text` to `path` whole (a temporary file, then renamed).
Status write_file_atomically(const std::string& path, const std::string& text);

// The process's communicators that dump into KOLO_FLIGHT_RECORDER_DIR.
// All of them dump when one fails (a hang across communicators shows only
// in all of their records) and on SIGUSR1: the handler only wakes a thread
// that calls them. The handler is installed once per process, and only
// where SIGUSR1 still has its default action (which would kill the
// process): a program's own handler stays.
class FlightRecorderRegistry {
 public:
  using Dump = std::function<void(const std::string& reason)>;
  static uint64_t add(Dump dump);
  // Waits for a dump of this one in progress.
  static void remove(uint64_t id);
  static void dump_all(const std::string& reason);
};

}  // namespace kolo
