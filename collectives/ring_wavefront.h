// The ring's steps as pipeline units (pipeline.h), in the order that lets
// them overlap: what the plain ring (ring.cc) and the compressed ring
// (compressed_ring.cc) build their schedules with.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "collectives/pipeline.h"

namespace kolo {

// The verbs of one ring step on one segment, as NCCL's runRing reads:
// send to the right neighbour, receive from the left and reduce, receive
// and copy. Each call appends one message to the pipeline. The k-th send
// of step s > 0 forwards what the k-th receive of step s - 1 (same segment)
// produced, so it is posted once that receive is finished.
class RingStep {
 public:
  RingStep(Pipeline* p, size_t elem_size, const std::vector<long>* previous, std::vector<long>* received,
           long* last_reduce)
      : p_(p), elem_size_(elem_size), previous_(previous), received_(received), last_reduce_(last_reduce) {}

  void send(const void* data, size_t count) {
    const long after = previous_ ? (*previous_)[sends_++] : -1;
    p_->sends.push_back({data, count * elem_size_, after});
  }
  // dest = local OP received (then divided, for an average, where finalize).
  // `transient`: a partial result that only the next step forwards
  // (RecvUnit::transient).
  void recv_reduce(void* dest, const void* local, size_t count, bool finalize, bool transient = false) {
    *last_reduce_ = static_cast<long>(p_->recvs.size());
    received_->push_back(static_cast<long>(p_->recvs.size()));
    p_->recvs.push_back({dest, count * elem_size_, local, count, finalize, transient});
  }
  void recv_copy(void* dest, size_t count) {
    received_->push_back(static_cast<long>(p_->recvs.size()));
    p_->recvs.push_back({dest, count * elem_size_, nullptr, count, false});
  }

 private:
  Pipeline* p_;
  size_t elem_size_;
  const std::vector<long>* previous_;  // nullptr at step 0
  std::vector<long>* received_;
  long* last_reduce_;
  size_t sends_ = 0;
};

// Builds `steps` ring steps over `segments` segments in wavefront order:
// (step s, segment j) belongs to wave s + j, and waves go out in order,
// lower steps first within a wave. Every dependency then points to an
// earlier wave (no deadlock: the left neighbour sends in the same order),
// and each segment is forwarded right after it was received and reduced,
// while it is still in cache. Steps of different segments overlap, so the
// wire stays as busy as in a step-by-step schedule. Returns the index of
// the last reducing receive (-1 for none).
template <typename StepFn>
long build_wavefront(int steps, size_t segments, size_t elem_size, Pipeline* p, StepFn step_fn) {
  std::vector<std::vector<long>> received(static_cast<size_t>(steps) * segments);
  long last_reduce = -1;
  const long waves = steps + static_cast<long>(segments) - 1;
  for (long wave = 0; wave < waves; ++wave) {
    const int first = static_cast<int>(std::max<long>(0, wave - static_cast<long>(segments) + 1));
    const int last = static_cast<int>(std::min<long>(steps - 1, wave));
    for (int step = first; step <= last; ++step) {
      const size_t segment = static_cast<size_t>(wave - step);
      const std::vector<long>* previous = step == 0 ? nullptr : &received[(step - 1) * segments + segment];
      RingStep verbs(p, elem_size, previous, &received[step * segments + segment], &last_reduce);
      step_fn(step, segment, verbs);
    }
  }
  return last_reduce;
}


}  // namespace kolo
