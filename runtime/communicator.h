// A communicator: this rank's membership in a job, and the collectives it
// can run with the other ranks. Creating one does the rendezvous (rank 0
// serves the store), connects the ring, and learns the local rank.
//
// Errors: a bad argument is reported and changes nothing. Any failure while
// talking to peers (timeout, lost peer, mismatch, abort) is sticky: the
// communicator is unusable afterwards and every call returns that error at
// once, because the peers can no longer be assumed to be in step.
//
// A failure spreads: the failing rank records it in the rendezvous store
// (the first one recorded is the job's root cause) and closes its
// connections; its neighbours then fail in turn, and every rank reports the
// root cause (the dead rank's name, or MISMATCH) with its own view.
//
// The class is written in files, one concern each: communicator.cc (the
// collectives and point-to-point, checked and handed to the algorithm
// tables), communicator_bring_up.cc (the ways one is made),
// communicator_failure.cc (abort, revoke, flight records), and
// communicator_resize.cc (shrink, grow); over parts with interfaces and
// tests of their own: bring_up.h (meeting the others; transports,
// connections, arenas: the Wiring), call_launcher.h (blocking, stream and
// asynchronous launches), sticky_error.h (the kept failure and the job's
// first one), tuning.h (pacing, costs, the hosts' layout), membership.h,
// rendezvous.h.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collectives/choice_memo.h"
#include "collectives/cost_model.h"
#include "collectives/dtype.h"
#include "collectives/hierarchical.h"
#include "collectives/pipeline.h"
#include "collectives/point_to_point.h"
#include "collectives/ring.h"
#include "collectives/wire_format.h"
#include "common/function_ref.h"
#include "common/status.h"
#include "runtime/bring_up.h"
#include "runtime/call_launcher.h"
#include "runtime/config.h"
#include "runtime/flight_recorder.h"
#include "runtime/gpu_context.h"
#include "runtime/membership.h"
#include "runtime/launch_env.h"
#include "runtime/op_handle.h"
#include "runtime/rendezvous.h"
#include "runtime/sticky_error.h"
#include "transport/kind.h"
#include "transport/registered_buffer.h"
#include "transport/shared_arena.h"
#include "transport/store.h"
#include "transport/transport.h"

namespace kolo {

class Communicator {
 public:
  // Rendezvous from the launcher's environment (see launch_env.h).
  static Status create_from_env(std::unique_ptr<Communicator>* out);
  // Rendezvous at an explicit master; local rank/size from info if >= 0.
  static Status create(const LaunchInfo& info, const Config& config, std::unique_ptr<Communicator>* out);
  // Rendezvous through a store the caller provides (tests run ranks as
  // threads over an in-memory store).
  static Status create_with_store(int rank, int size, Store* store, const Config& config,
                                  std::unique_ptr<Communicator>* out);
  // A second communicator over the same ranks with connections of its own
  // (keys under `prefix` in the parent's store), so that its traffic never
  // interleaves with the parent's. Collective: every rank must call it.
  // full_mesh connects every pair of ranks (needed by alltoall).
  static Status create_sibling(Communicator* parent, const std::string& prefix, bool full_mesh,
                               std::unique_ptr<Communicator>* out);
  // MPI_Comm_split / ncclCommSplit: the ranks that pass the same color form
  // a new communicator, ordered by key, then by rank here; kSplitNoColor
  // takes part and gets none (*out stays null). Collective over this
  // communicator, in the order of its other collectives. The new one has
  // connections and store keys of its own, and needs nothing of this one
  // afterwards: either may be destroyed first.
  static constexpr int kSplitNoColor = -1;
  Status split(int color, int key, std::unique_ptr<Communicator>* out);

  // ncclCommShrink: the ranks not in `exclude` (ranks here) form a new
  // communicator, numbered in their order here. Called by every survivor,
  // never by an excluded rank; it uses none of this communicator's
  // connections and waits for no excluded rank, so it works on a failed or
  // revoked communicator, around a dead rank or a stuck one, in bounded
  // time (the timeout). The survivors agree through the rendezvous store
  // (runtime/shrink_agreement.h). Flags: kShrinkAbort revokes this
  // communicator first, so that an operation still in flight on it ends;
  // kShrinkDropUnresponsive also leaves out every rank that has not called
  // shrink by the deadline or whose process has ended.
  static constexpr int kShrinkDefault = 0;
  static constexpr int kShrinkAbort = 1;
  static constexpr int kShrinkDropUnresponsive = 2;
  Status shrink(const std::vector<int>& exclude, int flags, std::unique_ptr<Communicator>* out);
  // Growing (NCCL's ncclCommGrow): every rank here calls grow(new_size);
  // ranks size() .. new_size - 1 join with join_grown, from what
  // next_grow() says (the C API carries it in an id, unique_id.h). The
  // ranks here keep their numbers. Collective over both; bounded by the
  // timeout, naming the ranks that never arrived.
  struct GrowPlace {
    std::string store_path;  // the grow's keys in the rendezvous store
    std::string job_name;
  };
  GrowPlace next_grow() const;
  Status grow(int new_size, std::unique_ptr<Communicator>* out);
  static Status join_grown(std::shared_ptr<Rendezvous> rendezvous, const GrowPlace& place, int rank, int size,
                           const Config& config, std::unique_ptr<Communicator>* out);
  ~Communicator();

  // The transports this communicator's peers are reached by: "shm", "ib",
  // "tcp" or several joined by '+' ("none" alone in the world).
  const char* transport_name() const { return wiring_.transport ? wiring_.transport->name() : "none"; }
  // Whether this host's ranks share an arena, through which the
  // hierarchical schedules' phases within a host go (open_host_arena).
  bool has_host_arena() const { return wiring_.host_arena != nullptr; }
  // The allreduce schedule for a host buffer of `bytes`: "ring",
  // "recursive_doubling", "halving_doubling", "tree", "hierarchical" or
  // "shared_memory".
  const char* allreduce_algorithm(size_t bytes);
  // What `collective` (allreduce, allgather, reduce_scatter, broadcast,
  // reduce, gather, scatter, alltoall) of `bytes` would run on host
  // buffers, and the cost model's estimate of its time
  // (collectives/cost_model.h); see kolo_comm_estimate.
  Status estimate(const std::string& collective, size_t bytes, double* seconds, const char** algorithm);
  int rank() const { return world_.rank; }
  int size() const { return world_.size; }
  int local_rank() const { return world_.local_rank; }
  int local_size() const { return world_.local_size; }
  const Config& config() const { return config_; }
  const Membership& membership() const { return world_; }

  // Buffers are host memory or this rank's GPU's (never both in one call).
  // Blocking calls return when done; with device buffers they first wait
  // for the work already on the legacy default stream. Calls on a stream
  // return at once: the collective runs after the work the stream has
  // before it, and the stream's later work waits for it. A failure then
  // turns sticky (async_error()); the stream is released all the same.
  // Asynchronous calls (Launch::done) return at once too, after checking
  // their arguments: they run on the communicator's thread in call order,
  // with the stream-ordered ones, and complete their handles (a failure is
  // sticky as well). A blocking call first waits for everything queued.
  Status allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, const Launch& launch = {});
  // The same with `wire` on the wire (wire_format.h): kNative for the
  // elements themselves, std::nullopt for the communicator's default
  // (Config::wire_format, which applies where it can: float sums and
  // averages above small_allreduce_bytes). A format asked for a call it
  // cannot carry is INVALID_ARGUMENT. residuals: nullptr, or error
  // feedback's state for this buffer, `count` floats the caller keeps
  // between calls (compressed_ring.h); unused without a format.
  Status allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                   std::optional<WireFormat> wire, float* residuals, const Launch& launch = {});
  // One allreduce over several buffers at once, as over their
  // concatenation, each reduced where it lies (allreduce_spans below),
  // launched as the others are: blocking, asynchronous or on a stream.
  Status allreduce_many(std::vector<Span> spans, DataType dtype, ReduceOp op, const Launch& launch = {});
  Status allgather(const void* send, void* recv, size_t send_count, DataType dtype, const Launch& launch = {});
  Status broadcast(void* buf, size_t count, DataType dtype, int root, const Launch& launch = {});
  Status reduce_scatter(const void* send, void* recv, size_t recv_count, DataType dtype, ReduceOp op,
                        const Launch& launch = {});
  Status barrier(const Launch& launch = {});
  // Opens this rank's GPU (gpu_context.h) and gives its CUDA device number.
  Status gpu_ordinal(int* ordinal);
  // Whether the buffers are this rank's GPU's memory (GpuContext::classify).
  Status classify(BufferList buffers, bool* on_device);
  // This rank's GPU, opened if need be; UNSUPPORTED saying why when none.
  Status gpu_device(Device** device);
  // Block sizes per rank (elements), packed in rank order; the caller
  // guarantees the arguments are the same on every rank (the runtime
  // engine negotiated them). Checked as allgatherv and reduce_scatterv
  // check theirs, and run by the same algorithm tables. reduce_scatter_v's
  // and allreduce_spans' buffers are host memory or this rank's GPU's, as
  // the public collectives' are (blocking); the result is multiplied by
  // postscale where it lies.
  Status allgather_v(const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype);
  Status reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype, ReduceOp op,
                          double postscale = 1);
  // One allreduce over the concatenation of spans (see allreduce_spans),
  // with `wire` as above; residuals: error feedback's state for a wire
  // format, one float array per span (compressed_ring.h), or nullptr.
  // scales: nullptr, or one per span: its send scaled into its recv before
  // the reduction, and its result after (on a GPU by the GPU's kernels, in
  // the order of its stream).
  Status allreduce_spans(const std::vector<Span>& spans, DataType dtype, ReduceOp op,
                         std::optional<WireFormat> wire = std::nullopt,
                         const std::vector<float*>* residuals = nullptr,
                         const std::vector<SpanScale>* scales = nullptr);
  // What a call asking for `wire` sends (see allreduce above).
  Status wire_for(std::optional<WireFormat> wire, DataType dtype, ReduceOp op, size_t bytes, WireFormat* out) const;
  Status alltoall(const void* send, const std::vector<size_t>& send_counts, void* recv,
                  const std::vector<size_t>& recv_counts, DataType dtype);
  // Runs `fn` under the call lock like a collective (failures become
  // sticky): for protocols built directly on the transport.
  Status run_custom(const char* what, const std::function<Status(const ScheduleContext&)>& fn);
  // Declares [data, data + bytes) long-lived until deregister_memory covers
  // it (Transport::register_memory): over RDMA, messages in it move with no
  // staging copy. Waits for a collective in progress, like one.
  Status register_memory(const void* data, size_t bytes);
  Status deregister_memory(const void* data, size_t bytes);
  // Declares a kolo-owned buffer (the engine's fusion buffer) to this
  // communicator's transport. From the thread that runs its collectives.
  void attach(RegisteredBuffer* buffer) { buffer->attach(wiring_.transport.get()); }
  // Wakes a progress() wait in another thread (see Transport::interrupt).
  void interrupt();
  // Where the next allreduces record the end of their reduce-scatter phase
  // (for the timeline); nullptr for nowhere.
  void set_reduce_scatter_mark(std::chrono::steady_clock::time_point* mark) { rs_mark_ = mark; }

  // Ends this communicator's waits on the rendezvous store with `why`, now
  // and later: a split's store is its own view of the world's (the world's
  // own ignores this), so its engine, still connecting, stops waiting.
  void cancel_store_waits(const Status& why);
  // Makes the current and every later call fail with ABORTED. Any thread.
  // (A CommunicatorHandle aborts its engine's named operations too.)
  void abort();
  // ncclCommRevoke: as abort(), with REVOKED, and the reason recorded as
  // the communicator's first failure, so that every rank it reaches (its
  // connections close at once) reports REVOKED too. Waits for no peer; the
  // store write is bounded (2 s). Any thread; then shrink() it.
  void revoke();
  // The sticky error; OK while healthy.
  Status async_error() const;
  // Writes this rank's flight record (flight_recorder.h) to `path`, or ""
  // for its file in KOLO_FLIGHT_RECORDER_DIR (INVALID_USAGE if unset).
  // Any thread, at any time.
  Status dump_flight_record(const std::string& path, const std::string& reason);

  // The collectives of the C API's kolo_reduce .. kolo_alltoallv (kolo.h
  // says what each accepts), checked as the calls above are. Blocking or
  // asynchronous, on host or device buffers. Rooted ones and the "v" forms with
  // displacements run as chains around the ring (collectives/rooted.h).
  // counts are elements per rank, significant on every rank; displs
  // (elements; empty = blocks in rank order, packed) as kolo.h says.
  Status reduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op, int root,
                const Launch& launch = {});
  Status gatherv(const void* send, size_t send_count, void* recv, const std::vector<size_t>& counts,
                 const std::vector<size_t>& displs, DataType dtype, int root, const Launch& launch = {});
  Status scatterv(const void* send, const std::vector<size_t>& counts, const std::vector<size_t>& displs, void* recv,
                  size_t recv_count, DataType dtype, int root, const Launch& launch = {});
  Status allgatherv(const void* send, size_t send_count, void* recv, const std::vector<size_t>& counts,
                    const std::vector<size_t>& displs, DataType dtype, const Launch& launch = {});
  Status reduce_scatterv(const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype, ReduceOp op,
                         const Launch& launch = {});
  // Connects every pair of ranks first, once (see connect_mesh_once).
  Status alltoallv(const void* send, const std::vector<size_t>& send_counts, const std::vector<size_t>& send_displs,
                   void* recv, const std::vector<size_t>& recv_counts, const std::vector<size_t>& recv_displs,
                   DataType dtype, const Launch& launch = {});

  // Point-to-point (kolo_send, kolo_recv): messages between a pair match in
  // call order, per direction. point_to_point posts a batch (a group) at
  // once and returns when all of it is done, so any pattern of sends and
  // receives in one batch completes without deadlock (asynchronously: the
  // batch is queued, and completes its handles when all of it is done).
  // Peers are connected on first use.
  Status send(const void* buf, size_t count, DataType dtype, int peer);
  Status recv(void* buf, size_t count, DataType dtype, int peer);
  Status point_to_point(const std::vector<PointToPoint>& ops, const Launch& launch = {});
  // One operation's arguments (dtype, buffer, peer), as point_to_point
  // checks them: for callers that queue operations first (groups).
  Status check_point_to_point(const PointToPoint& op) const;
  // A receive from any other rank (kolo_recv_any; collectives/
  // point_to_point.h's receive_from_any says which message it takes and
  // how it waits). *source is the sender's rank, written before the call
  // (or, asynchronously, its handles) completes; -1 until then. Host
  // buffers only; refused at once (nothing sticky) in a world of one and
  // where a peer's transport cannot look at messages before they are
  // received (RDMA), both saying why.
  Status recv_any(void* buf, size_t count, DataType dtype, int* source, const Launch& launch = {});

 private:
  explicit Communicator(const Config& config);
  // A world communicator's: meet the others, then bring_up.
  Status init(int local_rank, int local_size);
  // Everything after the membership is settled, for every way a
  // communicator is made (world, sibling, split, shrink, grow):
  // bring_up.h's bring_up into wiring_, then the launcher and the logs.
  Status bring_up(const std::string& store_prefix, bool full_mesh,
                  std::vector<std::unique_ptr<DirectTransport>> opened);
  // A collective's schedule, seen in place while it runs.
  using CollectiveRef = CallLauncher::CollectiveRef;
  // Runs a collective under the call lock, turning its failure sticky
  // (communicator_failure.cc).
  // The flight recorder keeps the call (flight_recorder.h).
  Status run(const CallRecord& call, CollectiveRef fn);
  // wire_for, then, where that is a format, device buffers reduce in their
  // own dtype: the default gives way, a format `wire` asks for is refused.
  Status wire_for_buffers(std::optional<WireFormat> wire, DataType dtype, ReduceOp op, size_t bytes,
                          BufferList buffers, WireFormat* out);
  // A collective of the public API, launched as `launch` says
  // (call_launcher.h), each kind ending in run().
  template <typename Fn>
  Status dispatch(const CallRecord& call, BufferList buffers, const Launch& launch, Fn&& fn) {
    return launcher_->launch(call, buffers, launch, std::forward<Fn>(fn));
  }
  FlightRecorder::Identity identity() const;
  // Dumps into KOLO_FLIGHT_RECORDER_DIR, when set (a failure, SIGUSR1).
  void dump_if_asked(const std::string& reason);
  // Dumps on SIGUSR1 from now on, when KOLO_FLIGHT_RECORDER_DIR is set
  // (the end of bring_up: the identity is known).
  void listen_for_dump_signal();
  Status check_healthy() const;
  // Makes `local` the sticky error, reconciled with the job's first failure:
  // announces it in the store unless another rank's came first (then that
  // one's code and story are what every rank reports), and then ends the
  // connections so the neighbours learn at once.
  Status fail(Status local);
  ScheduleContext schedule_context();
  // What the algorithm tables (collectives/algorithms.h) choose from.
  Topology topology() const;
  Thresholds thresholds() const { return thresholds_; }

  const Config config_;  // as asked; what it left open is settled in world_
  const Thresholds thresholds_;  // from config_, read once: each call asks for them
  Membership world_;
  uint64_t splits_ = 0;  // split() calls so far: the same on every rank, since splits are collective
  uint64_t shrinks_ = 0;  // shrink() calls so far: the same on every survivor
  uint64_t grows_ = 0;    // grow() calls so far
  // The transport, arenas, hosts' layout, costs and pacing bring_up made
  // (bring_up.h); read-only after it, but for ending the connections.
  Wiring wiring_;
  // The collectives' recent choices (choice_memo.h): used under
  // call_mutex_ only, through the topology the collectives run with.
  mutable ChoiceMemo choices_;
  HostMemory host_memory_;
  // How calls are launched, made by bring_up (the GPU is this rank's
  // then); destroyed first thing in the destructor: its queued jobs use
  // everything else.
  std::unique_ptr<CallLauncher> launcher_;

  std::chrono::steady_clock::time_point* rs_mark_ = nullptr;
  std::mutex call_mutex_;  // one collective at a time
  FlightRecorder recorder_;
  uint64_t dump_signal_id_ = 0;  // FlightRecorderRegistry's registration, 0 if none
  std::string sibling_prefix_;   // a sibling's store prefix (the engine's connections); "" otherwise
  StickyError sticky_;
  // alltoallv has connected every pair (under call_mutex_).
  bool mesh_connected_ = false;
  AnySourceState any_source_;  // recv_any's, under call_mutex_
  Status connect_mesh_once();
};

}  // namespace kolo
