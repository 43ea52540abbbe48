// The executor under every ring algorithm. An algorithm describes its
// traffic as two ordered lists:
//   - send units, each a buffer to send to the right neighbour, optionally
//     "after" a receive unit (it forwards what that receive produced);
//   - receive units, each a message from the left neighbour that either lands
//     directly in its destination or lands in a staging slot and is reduced
//     into its destination (out = local OP staged).
// A reduction whose result only goes on to the right neighbour (a ring's
// partial sums, a chain's) is marked `transient`: the executor may keep it
// in a buffer of its own, still in the cache when it is sent, instead of
// writing it to its destination in memory and reading it back (NCCL's
// recvReduceSend never stores a partial either).
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
  bool prepare = false;  // Pipeline::work writes data just before it goes
};

struct RecvUnit {
  void* dest;          // where the result goes
  size_t bytes;
  const void* local;   // reduce: this rank's operand; nullptr: plain receive into dest
  size_t count;        // elements, for the reduction
  bool finalize;       // apply the average's division after reducing
  // The result is read only by the one send that forwards it (a SendUnit
  // "after" this unit with data == dest), and dest is written again before
  // anyone else reads it: the executor may keep the result in a buffer of
  // its own and send it from there, leaving dest untouched. It does so
  // only for a reduction (local set) that is not finalized, with exactly
  // one send after it of the same bytes, and while it has a buffer free.
  bool transient = false;
};

// What a rank's working set may take and still be in the cache when it is
// read back: half of a core's L2 cache `l2`, clamped to 256 KiB..2 MiB
// (an unknown L2, 0, is taken as 1 MiB).
size_t pipeline_cache_bytes(size_t l2);

// The pipeline's unit on the wire: `configured` (KOLO_SEGMENT_BYTES) when
// positive; for 0 (automatic), pipeline_cache_bytes where every rank on
// the machine has a core of its own, so that a staged segment is still in
// the cache when it is reduced, and 2 MiB where ranks share cores, whose
// waits then sleep and wake per unit (settings_table.h has the
// measurements).
size_t pipeline_segment_bytes(int64_t configured, bool own_core, size_t l2);

// What a schedule does to its units besides moving them, where that is
// more than a reduction (the compressed ring, compressed_ring.h): the
// executor calls it in unit order, on its own thread.
class UnitWork {
 public:
  virtual ~UnitWork() = default;
  // Send unit i (marked `prepare`) is about to be posted.
  virtual void before_send(size_t i) = 0;
  // Receive unit i has arrived at `data`: its staging slot where the unit
  // has a `local` operand, else its dest. Replaces the reduction and the
  // finalize of RecvUnit.
  virtual void after_recv(size_t i, const void* data) = 0;
};

// Per-call tuning, from the communicator's configuration.
struct PipelineOptions {
  // Receives that may wait in staging at once; as many transient results
  // may wait for their sends, in buffers of the same size.
  size_t staging_slots = 4;
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
  UnitWork* work = nullptr;  // nullptr: receives reduce or land as RecvUnit says
};

// `memory` holds the buffers the units name; its staging buffer takes the
// receives waiting to be reduced.
Status run_pipeline(const Pipeline& p, const PipelineOptions& options, Memory* memory);

}  // namespace kolo
