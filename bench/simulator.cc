#include "bench/simulator.h"

#include <ucontext.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <queue>
#include <unordered_map>
#include <vector>

#include "collectives/algorithms.h"
#include "collectives/hierarchical.h"
#include "collectives/tree_schedule.h"

namespace kolo::bench {
namespace {

// The simulation's state: the network's links, the messages, the event
// queue, and the ranks' fibers.
class Simulation {
 public:
  explicit Simulation(const SimulatedNetwork& net)
      : net_(net),
        n_(net.ranks()),
        clock_(n_, 0),
        state_(n_, State::kWaiting),
        out_local_(n_, 0),
        in_local_(n_, 0),
        egress_(net.hosts, 0),
        ingress_(net.hosts, 0),
        fibers_(n_) {}

  Status run(const std::string& algorithm, size_t bytes, SimulatedRun* out);

  // From a rank's fiber.
  void post(int rank, int peer, size_t bytes, Request* request, bool send) {
    if (send) {
      const int m = static_cast<int>(messages_.size());
      messages_.push_back({rank, peer, bytes, request, nullptr, false, 0});
      Pair& p = pairs_[key(rank, peer)];
      if (!p.recvs.empty()) {
        match(m, p.recvs.front());
        p.recvs.pop_front();
      } else {
        p.sends.push_back(m);
      }
      push(clock_[rank], Event::kSendStart, m);
    } else {
      Pair& p = pairs_[key(peer, rank)];
      const PendingRecv r{rank, bytes, request};
      if (!p.sends.empty()) {
        const int m = p.sends.front();
        p.sends.pop_front();
        match(m, r);
        // Already here: done as soon as this rank looks.
        if (messages_[m].arrived) push(clock_[rank], Event::kRecvDone, m);
      } else {
        p.recvs.push_back(r);
      }
    }
  }
  // progress(): this rank waits until a completion wakes it.
  void block(int rank) {
    state_[rank] = State::kBlocked;
    swapcontext(&fibers_[rank].context, &main_);
  }
  void compute(int rank, double seconds) { clock_[rank] += seconds; }

 private:
  enum class State { kWaiting, kRunnable, kBlocked, kFinished };
  struct PendingRecv {
    int rank;
    size_t bytes;
    Request* request;
  };
  struct Message {
    int src, dst;
    size_t bytes;
    Request* send;
    Request* recv;  // once matched
    bool arrived;
    size_t recv_bytes;
  };
  struct Pair {
    std::deque<int> sends;           // messages no receive has taken yet
    std::deque<PendingRecv> recvs;   // receives no message has met yet
  };
  struct Event {
    enum Kind { kSendStart, kSendDone, kArrive, kRecvDone } kind;
    double time;
    uint64_t seq;
    int message;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : seq > o.seq; }
  };

  int64_t key(int src, int dst) const { return int64_t(src) * n_ + dst; }
  int host(int rank) const { return rank / net_.ranks_per_host; }
  void push(double t, Event::Kind kind, int message) { events_.push({kind, t, seq_++, message}); }
  void match(int m, const PendingRecv& r) {
    messages_[m].recv = r.request;
    messages_[m].recv_bytes = r.bytes;
    if (r.bytes != messages_[m].bytes && error_.empty()) {
      error_ = "message from rank " + std::to_string(messages_[m].src) + " to " + std::to_string(r.rank) + " has " +
               std::to_string(messages_[m].bytes) + " bytes where the receive expects " + std::to_string(r.bytes);
    }
  }
  // A request of `rank` completes at t: its fiber may go on.
  void complete(int rank, Request* request, double t) {
    if (state_[rank] == State::kFinished) return;  // its requests are gone
    request->done = true;
    clock_[rank] = std::max(clock_[rank], t);
    if (state_[rank] == State::kBlocked) {
      state_[rank] = State::kRunnable;
      runnable_.push_back(rank);
    }
  }
  void handle(const Event& e);
  // Each rank's code runs as a fiber on the simulator's own thread: a
  // rank that waits hands control back to the loop in run(), which goes on
  // with the next runnable rank or the earliest event. One thread, so no
  // locks, and a switch costs a fraction of a thread hand-off.
  struct Fiber {
    ucontext_t context;
    std::unique_ptr<char[]> stack;
  };
  static void start_fiber(unsigned high, unsigned low) {
    auto* sim = reinterpret_cast<Simulation*>((uintptr_t(high) << 32) | uintptr_t(low));
    sim->body_(sim->current_);
    sim->state_[sim->current_] = State::kFinished;
    // Returning resumes main_ (uc_link).
  }

  const SimulatedNetwork net_;
  const int n_;
  std::vector<double> clock_;
  std::vector<State> state_;
  std::vector<double> out_local_, in_local_;  // each rank's port within its host: free from
  std::vector<double> egress_, ingress_;      // each host's network link: free from
  std::vector<Message> messages_;
  std::unordered_map<int64_t, Pair> pairs_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t seq_ = 0;
  std::deque<int> runnable_;
  std::string error_;
  std::vector<Fiber> fibers_;
  ucontext_t main_;
  int current_ = -1;  // the rank whose fiber runs
  std::function<void(int)> body_;  // a rank's part of the call
  friend class SimulatedRank;
};

void Simulation::handle(const Event& e) {
  Message& m = messages_[e.message];
  switch (e.kind) {
    case Event::kSendStart: {
      // The sender's way out, then the receiver's way in, each taking
      // messages in turn at the link's bandwidth (a switch between them
      // holds what waits for a busy receiver, as it would a burst).
      const bool same = host(m.src) == host(m.dst);
      const LinkCost& link = same ? net_.local : net_.remote;
      double& out = same ? out_local_[m.src] : egress_[host(m.src)];
      double& in = same ? in_local_[m.dst] : ingress_[host(m.dst)];
      const double wire = double(m.bytes) / link.bytes_per_s;
      const double start = std::max(e.time, out);
      out = start + wire;
      in = std::max(out, in + wire);
      push(out, Event::kSendDone, e.message);
      push(in + link.latency_s, Event::kArrive, e.message);
      break;
    }
    case Event::kSendDone:
      complete(m.src, m.send, e.time);
      break;
    case Event::kArrive:
      m.arrived = true;
      if (m.recv) complete(m.dst, m.recv, e.time);
      break;
    case Event::kRecvDone:
      complete(m.dst, m.recv, e.time);
      break;
  }
}

// What the schedules see of the network and of memory, for one rank.
class SimulatedRank : public Transport, public Memory {
 public:
  SimulatedRank(Simulation* sim, int rank) : sim_(sim), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return sim_->n_; }
  Status connect(int, Deadline) override { return Status::ok(); }
  Status post_send(int peer, const void* data, size_t bytes, uint64_t tag, Request* r) override {
    *r = Request{const_cast<void*>(data), bytes, tag, false};
    sim_->post(rank_, peer, bytes, r, true);
    return Status::ok();
  }
  Status post_recv(int peer, void* data, size_t bytes, uint64_t tag, Request* r) override {
    *r = Request{data, bytes, tag, false};
    sim_->post(rank_, peer, bytes, r, false);
    return Status::ok();
  }
  Status progress(Deadline) override {
    sim_->block(rank_);
    return sim_->error_.empty() ? Status::ok() : internal_error(sim_->error_);
  }
  void abort() override {}
  void interrupt() override {}
  const char* name() const override { return "simulated"; }

  // Memory: time, no bytes. The buffers are never touched, so one
  // address stands for all of them.
  void copy(void* dst, const void* src, size_t bytes) override {
    if (dst != src) sim_->compute(rank_, double(bytes) / sim_->net_.copy_bytes_per_s);
  }
  void reduce(DataType dtype, ReduceOp, void*, const void*, const void*, size_t count) override {
    sim_->compute(rank_, double(count * dtype_size(dtype)) / sim_->net_.reduce_bytes_per_s);
  }
  void finalize(DataType dtype, ReduceOp op, void*, size_t count, int) override {
    if (op == ReduceOp::kAvg) sim_->compute(rank_, double(count * dtype_size(dtype)) / sim_->net_.copy_bytes_per_s);
  }
  void scale(DataType dtype, void*, const void*, size_t count, double) override {
    sim_->compute(rank_, double(count * dtype_size(dtype)) / sim_->net_.copy_bytes_per_s);
  }
  void* staging(size_t) override { return nowhere(); }
  void* scratch(size_t) override { return nowhere(); }
  void* packing(size_t) override { return nowhere(); }
  bool is_host() const override { return true; }
  static void* nowhere() { return reinterpret_cast<void*>(uintptr_t{1} << 44); }

 private:
  Simulation* sim_;
  int rank_;
};

Status Simulation::run(const std::string& algorithm, size_t bytes, SimulatedRun* out) {
  const size_t count = bytes / sizeof(float);
  std::vector<std::string> host_names;
  for (int r = 0; r < n_; ++r) host_names.push_back("host" + std::to_string(host(r)));
  CostModel costs;
  costs.local = net_.local;
  costs.remote = net_.remote;
  costs.reduce_bytes_per_s = net_.reduce_bytes_per_s;
  costs.segment_bytes = net_.segment_bytes;
  costs.cache_bytes = net_.cache_bytes;
  costs.tree_depth = double_tree_depth(n_);
  costs.tree_host_load = double_tree_host_load(n_, net_.ranks_per_host);
  Thresholds thresholds;
  thresholds.small_bytes = net_.small_bytes;
  thresholds.forced = algorithm == "auto" ? nullptr : algorithm.c_str();

  std::vector<std::unique_ptr<SimulatedRank>> ranks;
  std::vector<HostLayout> layouts(n_);
  std::vector<Topology> topologies(n_);
  for (int r = 0; r < n_; ++r) {
    ranks.push_back(std::make_unique<SimulatedRank>(this, r));
    Topology& t = topologies[r];
    t.rank = r;
    t.size = n_;
    t.host_count = net_.hosts;
    t.ranks_per_host = net_.ranks_per_host;
    t.costs = &costs;
    if (make_host_layout(host_names, r, &layouts[r])) t.hosts = &layouts[r];
  }
  Estimate estimate;
  KOLO_RETURN_IF_ERROR(kolo::estimate("allreduce", topologies[0], thresholds, bytes, true, &estimate));
  out->algorithm = estimate.algorithm;
  out->estimated = estimate.seconds;

  std::vector<Status> status(n_);
  body_ = [&](int r) {
    ScheduleContext ctx;
    ctx.transport = ranks[r].get();
    ctx.memory = ranks[r].get();
    ctx.rank = r;
    ctx.size = n_;
    ctx.left = (r + n_ - 1) % n_;
    ctx.right = (r + 1) % n_;
    ctx.segment_bytes = net_.segment_bytes;
    ctx.cache_bytes = net_.cache_bytes;
    ctx.pipeline.staging_slots = 4;
    void* buffer = SimulatedRank::nowhere();
    const std::vector<Span> spans = {Span{buffer, buffer, count}};
    status[r] = kolo::allreduce(ctx, topologies[r], thresholds, {spans, DataType::kFloat32, ReduceOp::kSum});
  };
  const size_t stack_bytes = 1 << 20;  // touched only as deep as the schedules go
  const uintptr_t self = reinterpret_cast<uintptr_t>(this);
  for (int r = 0; r < n_; ++r) {
    Fiber& f = fibers_[r];
    f.stack.reset(new char[stack_bytes]);
    getcontext(&f.context);
    f.context.uc_stack.ss_sp = f.stack.get();
    f.context.uc_stack.ss_size = stack_bytes;
    f.context.uc_link = &main_;
    makecontext(&f.context, reinterpret_cast<void (*)()>(&Simulation::start_fiber), 2, unsigned(self >> 32),
                unsigned(self & 0xffffffffu));
    state_[r] = State::kRunnable;
    runnable_.push_back(r);
  }
  // Every rank starts at time 0, in rank order; then the earliest event,
  // and the ranks it lets go on, until every rank has returned.
  for (;;) {
    while (!runnable_.empty()) {
      current_ = runnable_.front();
      runnable_.pop_front();
      swapcontext(&main_, &fibers_[current_].context);
    }
    if (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      handle(e);
      continue;
    }
    // Nothing left to happen. A rank still waiting would wait forever (a
    // real run's TIMEOUT): its progress() now fails, and it returns.
    bool stuck = false;
    for (int r = 0; r < n_; ++r) {
      if (state_[r] != State::kBlocked) continue;
      if (error_.empty()) error_ = "rank " + std::to_string(r) + " waits for a message that never comes";
      state_[r] = State::kRunnable;
      runnable_.push_back(r);
      stuck = true;
    }
    if (!stuck) break;
  }
  if (!error_.empty()) return internal_error("simulated " + out->algorithm + " allreduce: " + error_);
  for (int r = 0; r < n_; ++r) {
    if (!status[r].is_ok()) return internal_error("simulated rank " + std::to_string(r) + ": " + status[r].to_string());
  }
  out->seconds = *std::max_element(clock_.begin(), clock_.end());
  out->messages = messages_.size();
  return Status::ok();
}

}  // namespace

Status simulate_allreduce(const SimulatedNetwork& network, const std::string& algorithm, size_t bytes,
                          SimulatedRun* out) {
  if (network.hosts < 1 || network.ranks_per_host < 1) return invalid_argument("a network needs hosts and ranks");
  Simulation sim(network);
  return sim.run(algorithm, bytes, out);
}

}  // namespace kolo::bench
