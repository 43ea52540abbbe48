// The executor under every ring algorithm. An algorithm describes its
// traffic as two ordered lists:
//   - send units, each a buffer to send to the right neighbour, optionally
//     "after" a receive unit (it forwards what that receive produced);
//   - receive units, each a message from the left neighbour that either lands
//     directly in its destination or lands in a staging slot and is reduced
//     into its destination (out = local OP staged).
// The executor posts every send as soon as its dependency is met and keeps a
// window of receives posted ahead, so receiving, reducing and sending of
// different segments overlap. It knows nothing of chunks or steps; those are
// in ring_schedule.h and the algorithms.
#pragma once

#include <chrono>
#include <cstddef>
#include <vector>

#include "collectives/dtype.h"
#include "collectives/memory.h"
#include "common/status.h"
#include "transport/transport.h"

namespace kolo {

struct SendUnit {
  const void* data;
  size_t bytes;
  long after;  // receive unit that must be finished first; -1 for none
};

struct RecvUnit {
  void* dest;          // where the result goes
  size_t bytes;
  const void* local;   // reduce: this rank's operand; nullptr: plain receive into dest
  size_t count;        // elements, for the reduction
  bool finalize;       // apply the average's division after reducing
};

// Per-call tuning, from the communicator's configuration.
struct PipelineOptions {
  size_t staging_slots = 4;   // receives that may wait in staging at once
  double timeout_s = 300;     // longest time without any progress
};

struct Pipeline {
  Transport* transport;
  int left;
  int right;
  uint64_t tag;
  // What reduce receives compute (RecvUnit::local) and finalize divides by.
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int divisor = 1;
  std::vector<SendUnit> sends;
  std::vector<RecvUnit> recvs;
  // When receive unit `mark_recv` is finished, the time is written to
  // *mark_time (for the timeline: where reduce-scatter ends in an allreduce).
  long mark_recv = -1;
  std::chrono::steady_clock::time_point* mark_time = nullptr;
};

// `memory` holds the buffers the units name; its staging buffer takes the
// receives waiting to be reduced.
Status run_pipeline(const Pipeline& p, const PipelineOptions& options, Memory* memory);

}  // namespace kolo
