// The runtime engine: named asynchronous operations, agreed across ranks and
// fused, the way Horovod's background loop works, with no fixed tick.
//
// Threads: callers submit from any thread; one background thread per engine
// negotiates and runs everything, over a link of its own (engine_link.h),
// connected by the first submission on each rank. In a job the link is a
// sibling of the caller's communicator (sibling_engine_link.h), so
// synchronous collectives on the parent never interleave with the engine's
// traffic; the engine itself knows only the link's interface.
//
// Rounds: the thread idles until this rank has news (a submission, a join,
// a stall timer) or a peer starts a round. A round starts with a token passed
// once around the ring (which wakes idle ranks), then one small allreduce of
// the negotiation control vector, plus, only when some rank has requests not
// in the response cache, an allgather of those (see negotiator.h). Then the
// ready operations run, allreduces fused into buffers of up to
// KOLO_FUSION_THRESHOLD bytes. Submissions that arrive meanwhile wait for the
// next round, which starts as soon as the current one ends (that is how
// batches form: what became ready during a round goes in the next), or, if
// KOLO_CYCLE_TIME_MS is set, not sooner than that after it started. The
// default is 0: a fixed tick floors every operation's latency (a 1 ms one
// made a small synchronous allreduce take 2.1 ms instead of 0.07 ms on 2
// ranks) and, measured on backprop of MLPs from 17 K to 8 M parameters,
// formed no better batches.
//
// Errors: a name whose ranks disagree fails with MISMATCH on every rank and
// the engine goes on; a transport failure, a peer lost, an abort or a stall
// beyond KOLO_STALL_SHUTDOWN_S stops the engine and fails every pending and
// later operation with that error.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/config.h"
#include "runtime/engine_link.h"
#include "runtime/negotiator.h"
#include "runtime/op_handle.h"
#include "runtime/op_request.h"
#include "runtime/operations.h"
#include "runtime/stall_inspector.h"
#include "runtime/submission.h"
#include "runtime/timeline.h"

namespace kolo {

struct EngineStats {
  uint64_t rounds = 0;
  uint64_t rounds_with_messages = 0;  // rounds that needed the allgather of requests
  double negotiation_seconds = 0;     // token + control allreduce + message exchange
  uint64_t cache_hits = 0;
  uint64_t operations = 0;
  uint64_t fused_batches = 0;         // allreduce batches of more than one tensor
};

class Engine {
 public:
  // An engine for `rank` of `size` ranks; `connector` makes its link at the
  // first submission (engine_link.h).
  Engine(const Config& config, int rank, int size, EngineConnector connector);
  // Announces this rank's shutdown to the others (their pending operations
  // fail), stops the thread and fails what is still pending here.
  ~Engine();

  // Checks the arguments (a bad one is an error here, no handle) and queues
  // the operation. Never blocks on other ranks.
  Status submit(Submission submission, std::shared_ptr<OpHandle>* out);
  // This rank has no more data: it takes part in the others' operations
  // without data until every rank has joined; then the handle completes with
  // join_last_rank set. No submissions in between.
  Status join(std::shared_ptr<OpHandle>* out);

  Status start_timeline(const std::string& path);
  void stop_timeline();

  // Any thread: fails everything pending with ABORTED (the peers learn too).
  void abort();
  // The same for kolo_comm_revoke: what is pending fails with REVOKED.
  void revoke();
  // Why the engine broke, for kolo_comm_get_async_error: OK while it works,
  // before it starts, and once a rank shut it down (this one or another: the
  // job finishing, or a rank leaving), which is no failure of the
  // communicator; what was pending then failed with PEER_LOST.
  Status error() const;
  EngineStats stats() const;
  // Bytes error feedback keeps for this rank's tensors (ResidualStore).
  size_t residual_bytes() const { return residuals_.bytes(); }
  // The last stall report rank 0 logged ("" if none).
  std::string last_stall_report() const;

 private:
  using Clock = SteadyClock;
  struct LocalOp {
    Submission sub;
    std::shared_ptr<OpHandle> handle;
    Clock::time_point submitted{};
    Clock::time_point negotiation_start{};  // first round that carried it
    Clock::time_point announced{};          // end of that round's negotiation
  };
  struct Queued {
    Submission sub;
    std::shared_ptr<OpHandle> handle;
    Clock::time_point submitted;
    bool join = false;
  };

  // OK while submissions are taken; else why not. Under mu_.
  Status accepting_locked() const;
  void start_locked();
  // Makes a connect still under way give up with `why`. Under mu_.
  void cancel_connect_locked(const Status& why);
  void thread_main();
  Status run();
  void drain_queue();
  Status wait_for_round();
  Status idle_wait(Clock::time_point until);
  Status run_round();
  Status exchange_messages(const std::string& mine, std::vector<std::string>* all);
  Status execute(const std::vector<OpResponse>& ready);
  // This rank's submission and handle for an agreed name (none once joined).
  Participation participation(const std::string& name);
  void finish_op(const std::string& name, Status status);
  void report_stalls(Clock::time_point now);
  void stop_all(Status status);

  const Config config_;
  EngineConnector connector_;
  bool ended_by_shutdown_ = false;  // a rank shut down its engine (the engine thread's own)
  int rank_;
  int size_;

  // Shared with submitting threads.
  mutable std::mutex mu_;
  std::condition_variable wake_;  // for a world of one (no transport to interrupt)
  std::vector<Queued> queue_;
  std::set<std::string> in_flight_;
  bool join_pending_ = false;
  bool stop_requested_ = false;
  bool aborted_ = false;
  bool revoked_ = false;  // aborted by a revoke of the communicator
  bool started_ = false;
  bool stopped_ = false;
  bool stopped_by_shutdown_ = false;
  Status stop_status_;
  std::unique_ptr<EngineLink> link_;  // set by the engine thread once connected
  EngineStats stats_;
  std::string last_stall_report_;
  std::thread thread_;

  // Engine thread only.
  std::unique_ptr<Negotiator> negotiator_;
  std::map<std::string, LocalOp> ops_;
  std::shared_ptr<OpHandle> join_handle_;
  bool shutdown_sent_ = false;
  bool peer_started_round_ = false;  // a peer's round token is here (await_round)
  Clock::time_point last_round_start_{};
  StallInspector stalls_;
  // Declared to link_'s transport. Members after link_, so they are
  // destroyed (and undeclared) while its transport still lives.
  RegisteredBuffer fusion_, scratch_;
  std::vector<unsigned char> identity_;
  ResidualStore residuals_;
  Timeline timeline_;
};

}  // namespace kolo
