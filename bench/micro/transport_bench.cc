// The TCP transport on loopback, without any collective on top: what one
// pair of ranks can move, and how long the smallest message takes to go
// there and back. These bound what the ring can do per hop on this host.
//
// Both ranks live in this process on a MemoryStore. The benchmark's thread
// drives rank 0 and times it; a second thread drives rank 1 for exactly as
// many iterations (State::max_iterations, fixed before the loop starts). The
// pair is built once per benchmark run, not per iteration, so connection
// set-up is not timed; the thread is joined and both transports destroyed
// before the run returns, so runs do not leak sockets or threads into each
// other. Times are wall-clock (UseRealTime): rank 0 spends much of its time
// waiting in poll(), so its CPU time says little.
//
//   transport/tcp/stream/<bytes>  rank 0 sends one message per iteration,
//                                 rank 1 receives it; bytes/s is payload.
//   transport/tcp/pingpong/8      8 bytes to rank 1 and 8 back per
//                                 iteration; time per iteration is one RTT.
//
// Note: on a host with few cores both progress loops spin (spin_us), so the
// numbers depend on having a core per rank; see nproc.

#include <benchmark/benchmark.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/deadline.h"
#include "common/status.h"
#include "transport/memory_store.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/transport.h"

namespace {

using kolo::Deadline;
using kolo::Request;
using kolo::Status;
using kolo::TcpTransport;

// Long enough for a loaded machine, short enough that a hang fails a run
// instead of stalling the suite.
constexpr double kTimeoutS = 5;
constexpr uint64_t kTag = 42;

// Calls progress() until every request in `reqs` is done.
Status wait_all(TcpTransport* t, std::initializer_list<const Request*> reqs) {
  const Deadline deadline = Deadline::after_seconds(kTimeoutS);
  for (;;) {
    bool all = true;
    for (const Request* r : reqs) all = all && r->done;
    if (all) return Status::ok();
    KOLO_RETURN_IF_ERROR(t->progress(deadline));
  }
}

// Two connected TcpTransports, rank 0 and rank 1, in this process.
struct LoopbackPair {
  kolo::MemoryStore store;
  std::unique_ptr<TcpTransport> rank0;
  std::unique_ptr<TcpTransport> rank1;

  Status open() {
    kolo::TcpOptions options;
    options.job_id = 0x6b6f6c6f;  // equal on both sides, or the handshake refuses
    KOLO_RETURN_IF_ERROR(TcpTransport::create(&store, 0, 2, options, &rank0));
    KOLO_RETURN_IF_ERROR(TcpTransport::create(&store, 1, 2, options, &rank1));
    // Both ends must call connect() at the same time: one side dials, the
    // other accepts, and each waits for the other.
    Status s1;
    std::thread t([&] { s1 = rank1->connect(0, Deadline::after_seconds(kTimeoutS)); });
    Status s0 = rank0->connect(1, Deadline::after_seconds(kTimeoutS));
    t.join();
    KOLO_RETURN_IF_ERROR(s0);
    return s1;
  }
};

// Runs `rank1_body` on its own thread while the benchmark loop drives rank 0
// through `rank0_iteration`. Whichever side fails first aborts the other's
// transport, so neither waits out its deadline on a dead peer. The thread
// is always joined before the pair (declared first) is destroyed.
template <typename Rank0Iteration, typename Rank1Body>
void run_pair(benchmark::State& state, Rank0Iteration rank0_iteration, Rank1Body rank1_body) {
  LoopbackPair pair;
  Status open = pair.open();
  if (!open.is_ok()) {
    state.SkipWithError(open.to_string().c_str());
    return;
  }
  const int64_t iterations = static_cast<int64_t>(state.max_iterations);
  Status peer_status;
  std::thread peer([&] {
    peer_status = rank1_body(pair.rank1.get(), iterations);
    if (!peer_status.is_ok()) pair.rank0->abort();
  });

  for (auto _ : state) {
    Status status = rank0_iteration(pair.rank0.get());
    if (!status.is_ok()) {
      // Stop rank 1, then report whichever side failed first (rank 0 sees
      // ABORTED when it was rank 1 that failed). SkipWithError must come
      // before leaving the loop early; only the first message is kept.
      pair.rank1->abort();
      peer.join();
      const bool peer_first = status.code() == kolo::Code::kAborted && !peer_status.is_ok();
      state.SkipWithError(peer_first ? ("rank 1: " + peer_status.to_string()).c_str()
                                     : ("rank 0: " + status.to_string()).c_str());
      break;
    }
  }
  if (peer.joinable()) peer.join();
  if (!peer_status.is_ok() && !state.error_occurred()) {
    state.SkipWithError(("rank 1: " + peer_status.to_string()).c_str());
  }
}

void BM_stream(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  // Separate buffers per rank: sharing one would let both threads touch the
  // same cache lines and would not be what two processes see.
  std::vector<uint8_t> send_buf(bytes, 0x5a);
  std::vector<uint8_t> recv_buf(bytes);

  run_pair(
      state,
      [&](TcpTransport* t) {
        Request send;
        KOLO_RETURN_IF_ERROR(t->post_send(1, send_buf.data(), bytes, kTag, &send));
        return wait_all(t, {&send});
      },
      [&](TcpTransport* t, int64_t iterations) {
        Request recv;
        for (int64_t i = 0; i < iterations; ++i) {
          KOLO_RETURN_IF_ERROR(t->post_recv(0, recv_buf.data(), bytes, kTag, &recv));
          KOLO_RETURN_IF_ERROR(wait_all(t, {&recv}));
        }
        return Status::ok();
      });
  // The send is done once the kernel took the bytes, so the last message
  // may still be in flight when the timer stops: at most one message of
  // error, small against the iteration counts a run reaches.
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void BM_pingpong(benchmark::State& state) {
  const size_t bytes = static_cast<size_t>(state.range(0));
  std::vector<uint8_t> buf0(bytes, 1), buf0_in(bytes);
  std::vector<uint8_t> buf1(bytes);

  run_pair(
      state,
      [&](TcpTransport* t) {
        // Post the receive first so the reply finds it waiting.
        Request ping, pong;
        KOLO_RETURN_IF_ERROR(t->post_recv(1, buf0_in.data(), bytes, kTag, &pong));
        KOLO_RETURN_IF_ERROR(t->post_send(1, buf0.data(), bytes, kTag, &ping));
        return wait_all(t, {&ping, &pong});
      },
      [&](TcpTransport* t, int64_t iterations) {
        Request in, out;
        for (int64_t i = 0; i < iterations; ++i) {
          KOLO_RETURN_IF_ERROR(t->post_recv(0, buf1.data(), bytes, kTag, &in));
          KOLO_RETURN_IF_ERROR(wait_all(t, {&in}));
          // Echo what arrived: the reply depends on the request, as in a ring.
          KOLO_RETURN_IF_ERROR(t->post_send(0, buf1.data(), bytes, kTag, &out));
          KOLO_RETURN_IF_ERROR(wait_all(t, {&out}));
        }
        return Status::ok();
      });
}

BENCHMARK(BM_stream)
    ->Name("transport/tcp/stream")
    ->Arg(1 << 20)
    ->Arg(4 << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

BENCHMARK(BM_pingpong)->Name("transport/tcp/pingpong")->Arg(8)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
