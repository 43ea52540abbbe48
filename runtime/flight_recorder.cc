#include "runtime/flight_recorder.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "common/json_string.h"

namespace kolo {
namespace {

std::string file_safe(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '-' || c == '_';
    if (!ok) c = '_';
  }
  return out;
}

}  // namespace

FlightRecorder::FlightRecorder(size_t entries) : ring_(entries) {}

void FlightRecorder::open_write(Entry& e) {
  e.version.store(e.version.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
}

void FlightRecorder::close_write(Entry& e) {
  e.version.store(e.version.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

bool FlightRecorder::read(const Entry& e, Snapshot* out) const {
  constexpr auto relaxed = std::memory_order_relaxed;
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint64_t version = e.version.load(std::memory_order_acquire);
    if (version % 2 == 1) {
      std::this_thread::yield();
      continue;
    }
    out->sequence = e.sequence.load(relaxed);
    out->call.what = e.what.load(relaxed);
    out->call.dtype = e.dtype.load(relaxed);
    out->call.op = e.op.load(relaxed);
    out->call.count = e.count.load(relaxed);
    out->call.root = e.root.load(relaxed);
    out->state = e.state.load(relaxed);
    out->start = e.start.load(relaxed);
    out->end = e.end.load(relaxed);
    {
      std::lock_guard<std::mutex> lock(mu_);
      out->error = e.error;
    }
    std::atomic_thread_fence(std::memory_order_acquire);
    if (e.version.load(relaxed) == version) return true;
  }
  return false;
}

uint64_t FlightRecorder::begin(const CallRecord& call) {
  constexpr auto relaxed = std::memory_order_relaxed;
  const uint64_t sequence = next_.load(relaxed);
  if (ring_.empty()) {
    next_.store(sequence + 1, relaxed);
    return sequence;
  }
  // The slot kept in step with the sequence, not `sequence % size`: a
  // 64-bit division costs more than the rest of recording.
  last_slot_ = next_slot_;
  if (++next_slot_ == ring_.size()) next_slot_ = 0;
  Entry& e = ring_[last_slot_];
  open_write(e);
  // Inside the write, as every field: a dump's read then sees the text
  // change with the version.
  if (!e.error.empty()) {  // only the calls write it, one at a time: this read races with no write
    std::lock_guard<std::mutex> lock(mu_);
    e.error.clear();
  }
  e.sequence.store(sequence, relaxed);
  e.what.store(call.what, relaxed);
  e.dtype.store(call.dtype, relaxed);
  e.op.store(call.op, relaxed);
  e.count.store(call.count, relaxed);
  e.root.store(call.root, relaxed);
  e.state.store(Entry::kStarted, relaxed);
  e.start.store(clock_.now(), relaxed);
  e.end.store(0, relaxed);
  close_write(e);
  next_.store(sequence + 1, std::memory_order_release);
  return sequence;
}

void FlightRecorder::end(uint64_t sequence, const Status& result) {
  constexpr auto relaxed = std::memory_order_relaxed;
  if (ring_.empty()) return;
  Entry& e = ring_[last_slot_];
  if (e.sequence.load(relaxed) != sequence) return;
  open_write(e);
  if (!result.is_ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    e.error = result.to_string();
  }
  e.end.store(clock_.now(), relaxed);
  e.state.store(result.is_ok() ? Entry::kCompleted : Entry::kFailed, relaxed);
  close_write(e);
}

void FlightRecorder::report_started() {
  std::lock_guard<std::mutex> lock(mu_);
  if (report_.state != Report::kNone) return;  // the first failure's report is the one that counts
  report_.state = Report::kPending;
  report_.started_ns = wall_clock_ns();
}

void FlightRecorder::report_finished(bool reached, int first_failure_rank) {
  std::lock_guard<std::mutex> lock(mu_);
  if (report_.state != Report::kPending) return;
  report_.state = reached ? Report::kReached : Report::kUnreachable;
  report_.finished_ns = wall_clock_ns();
  report_.first_failure_rank = first_failure_rank;
}

std::string FlightRecorder::to_json(const Identity& who, const std::string& reason) const {
  std::ostringstream out;
  out << "{\"format\": \"kolo-flight-record\", \"version\": 1"
      << ", \"job\": " << json_string(who.job) << ", \"communicator\": " << json_string(who.communicator)
      << ", \"rank\": " << who.rank << ", \"size\": " << who.size << ", \"host\": " << json_string(who.host)
      << ", \"pid\": " << ::getpid() << ", \"dumped_ns\": " << wall_clock_ns() << ", \"reason\": " << json_string(reason)
      << ", \"failure_report\": ";
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (report_.state == Report::kNone) {
      out << "null";
    } else {
      static const char* const kReportStates[] = {"", "pending", "reached", "unreachable"};
      out << "{\"store\": \"" << kReportStates[report_.state] << "\", \"started_ns\": " << report_.started_ns
          << ", \"finished_ns\": " << report_.finished_ns
          << ", \"first_failure_rank\": " << report_.first_failure_rank << "}";
    }
  }
  out << ", \"entries\": [";
  const StampClock::Reading stamps = clock_.read_out();
  const auto wall = [&](uint64_t stamp) { return stamp ? stamps.wall_ns(stamp) : 0; };
  // Entries written during the dump (a live call's) may be skipped.
  const uint64_t next = next_.load(std::memory_order_acquire);
  const uint64_t first = next > ring_.size() ? next - ring_.size() : 0;
  bool any = false;
  for (uint64_t s = first; s < next; ++s) {
    const Entry& e = ring_[s % ring_.size()];
    Snapshot snap;
    if (!read(e, &snap) || snap.sequence != s) continue;
    static const char* const kStates[] = {"started", "completed", "failed"};
    out << (any ? ",\n  " : "\n  ") << "{\"seq\": " << snap.sequence << ", \"what\": " << json_string(snap.call.what)
        << ", \"dtype\": "
        << (snap.call.dtype >= 0 ? json_string(dtype_name(static_cast<DataType>(snap.call.dtype))) : "null")
        << ", \"op\": " << (snap.call.op >= 0 ? json_string(op_name(static_cast<ReduceOp>(snap.call.op))) : "null")
        << ", \"count\": " << snap.call.count << ", \"root\": " << snap.call.root << ", \"state\": \""
        << kStates[snap.state] << "\", \"start_ns\": " << wall(snap.start) << ", \"end_ns\": " << wall(snap.end)
        << ", \"error\": " << (snap.error.empty() ? "null" : json_string(snap.error))
        << "}";
    any = true;
  }
  out << "\n]}\n";
  return out.str();
}

std::string flight_record_path(const std::string& dir, const FlightRecorder::Identity& who) {
  return dir + "/kolo-flight." + file_safe(who.job) + "." + file_safe(who.communicator) + ".rank" +
         std::to_string(who.rank) + ".json";
}

Status write_file_atomically(const std::string& path, const std::string& text) {
  // One temporary per write, not per process: a rank failing a call and the
  // SIGUSR1 thread dump at once when kolorun ends a failed job, and with one
  // shared name the second truncated the file the first was renaming into
  // place, leaving an empty record behind.
  static std::atomic<uint64_t> writes{0};
  const std::string temporary =
      path + ".tmp" + std::to_string(::getpid()) + "." + std::to_string(writes.fetch_add(1));
  {
    std::ofstream file(temporary, std::ios::binary | std::ios::trunc);
    file << text;
    file.close();
    if (!file) return invalid_usage("cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return invalid_usage("cannot write " + path);
  }
  return Status::ok();
}

namespace {

struct SignalState {
  std::mutex mu;
  std::map<uint64_t, FlightRecorderRegistry::Dump> dumps;
  uint64_t next = 1;
  bool installed = false;
  int pipe_write = -1;
};

SignalState& signal_state() {
  static SignalState* state = new SignalState();  // never destroyed: the waker thread outlives main
  return *state;
}

void on_sigusr1(int) {
  const char byte = 1;
  const int saved = errno;
  (void)!::write(signal_state().pipe_write, &byte, 1);
  errno = saved;
}

void install_once(SignalState& s) {
  if (s.installed) return;
  s.installed = true;
  struct sigaction current;
  if (::sigaction(SIGUSR1, nullptr, &current) != 0 || current.sa_handler != SIG_DFL ||
      (current.sa_flags & SA_SIGINFO)) {
    return;  // the program's own handler stays
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  s.pipe_write = fds[1];
  ::fcntl(fds[1], F_SETFL, O_NONBLOCK);
  std::thread([read_end = fds[0]] {
    char byte;
    while (::read(read_end, &byte, 1) > 0 || errno == EINTR) {
      FlightRecorderRegistry::dump_all("SIGUSR1");
    }
  }).detach();
  struct sigaction action {};
  action.sa_handler = on_sigusr1;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &action, nullptr);
}

}  // namespace

uint64_t FlightRecorderRegistry::add(Dump dump) {
  SignalState& s = signal_state();
  std::lock_guard<std::mutex> lock(s.mu);
  install_once(s);
  const uint64_t id = s.next++;
  s.dumps[id] = std::move(dump);
  return id;
}

void FlightRecorderRegistry::dump_all(const std::string& reason) {
  SignalState& s = signal_state();
  // Under the lock: a communicator being destroyed waits in remove() until
  // its dump is done.
  std::lock_guard<std::mutex> lock(s.mu);
  for (const auto& d : s.dumps) d.second(reason);
}

void FlightRecorderRegistry::remove(uint64_t id) {
  SignalState& s = signal_state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.dumps.erase(id);
}

}  // namespace kolo
