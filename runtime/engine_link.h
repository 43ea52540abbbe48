// What the engine (engine.h) needs of the connections it runs on, and
// nothing more: the collectives its operations become, the token that
// starts a round, and the controls another thread uses to end a wait.
//
// The engine knows this interface only. In a job, its link is a sibling of
// the caller's communicator (sibling_engine_link.h: connections of its own,
// so the engine's traffic never interleaves with the caller's); the engine's
// unit test runs it over an in-process fake (fake_engine_link.h), with no
// transport at all.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "collectives/algorithm.h"
#include "collectives/dtype.h"
#include "collectives/wire_format.h"
#include "common/deadline.h"
#include "common/status.h"
#include "runtime/submission.h"
#include "transport/registered_buffer.h"

namespace kolo {

class EngineLink {
 public:
  virtual ~EngineLink() = default;

  // Any thread.
  // Wakes await_round in the engine's thread (it returns, OK).
  virtual void interrupt() = 0;
  // Makes the current and every later call fail with ABORTED (abort) or
  // REVOKED (revoke); the peers learn of it through their own calls.
  virtual void abort() = 0;
  virtual void revoke() = 0;

  // The engine's thread, below.
  // Declares a buffer the engine owns to the link's transport, where that
  // lets messages in it skip a staging copy.
  virtual void attach(RegisteredBuffer* buffer) = 0;
  // Waits until `until` (no failure then), an interrupt, or a peer's round
  // token; *peer_started says whether that token is here. The token stays
  // for start_round to take.
  virtual Status await_round(Deadline until, bool* peer_started) = 0;
  // Starts a round: passes the token to the next rank and waits for the
  // previous rank's (within the timeout). After it, every rank is in the
  // round.
  virtual Status start_round() = 0;

  // The collectives, as Communicator's of the same names say (wire and
  // residuals: the compressed formats and their error feedback; scales and
  // postscale: what a tensor is multiplied by, where it lies). Buffers are
  // host memory, or this rank's GPU's (all of one call's).
  virtual Status allreduce(const void* send, void* recv, size_t count, DataType dtype, ReduceOp op,
                           std::optional<WireFormat> wire, float* residuals) = 0;
  virtual Status allreduce_spans(const std::vector<Span>& spans, DataType dtype, ReduceOp op,
                                 std::optional<WireFormat> wire, const std::vector<float*>* residuals,
                                 const std::vector<SpanScale>* scales = nullptr) = 0;
  virtual Status allgather(const void* send, void* recv, size_t send_count, DataType dtype) = 0;
  virtual Status allgather_v(const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype) = 0;
  virtual Status reduce_scatter_v(const void* send, void* recv, const std::vector<size_t>& counts, DataType dtype,
                                  ReduceOp op, double postscale = 1) = 0;
  virtual Status broadcast(void* buf, size_t count, DataType dtype, int root) = 0;
  virtual Status alltoall(const void* send, const std::vector<size_t>& send_counts, void* recv,
                          const std::vector<size_t>& recv_counts, DataType dtype) = 0;
  virtual Status barrier() = 0;
  // GPU memory of `bytes` for an operation's output (an allgather's or
  // alltoall's on GPU memory), released from whichever thread drops the
  // last copy of *out (or left to the process's end if the link went
  // first).
  virtual Status device_output(size_t bytes, std::shared_ptr<void>* out) = 0;
  // GPU memory holding `count` elements of op's identity: a joined rank's
  // part in an allreduce on GPU memory (it has no tensors of its own, and
  // its neighbours reach it on the GPU path). Valid until the next call.
  virtual Status identity_on_device(DataType dtype, ReduceOp op, size_t count, void** out) = 0;
  // Where the next allreduces record the end of their reduce-scatter phase
  // (for the timeline); nullptr for nowhere. A link whose allreduce has no
  // such phase leaves it unset.
  virtual void set_reduce_scatter_mark(std::chrono::steady_clock::time_point* mark) = 0;
};

// How an engine gets its link: on its own thread, at the first submission,
// since making one is collective (every rank's engine connects).
struct EngineConnector {
  // Makes the link; blocks until every rank's engine has called it.
  std::function<Status(std::unique_ptr<EngineLink>*)> connect;
  // From another thread while connect runs (the engine destroyed first):
  // makes connect give up soon with `why`.
  std::function<void(const Status& why)> cancel;
  // From a submitting thread: whether the submission's buffers are this
  // rank's GPU's memory (all of them) or the host's; an error names a mix,
  // another GPU's memory, or GPU memory where no GPU can be used. Empty:
  // every buffer is host memory (a link with no GPU path).
  std::function<Status(const Submission& submission, bool* on_device)> classify;
};

}  // namespace kolo
