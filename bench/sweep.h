// Sweep mode: one collective over a range of sizes, the nccl-tests table.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "bench/model.h"
#include "bindings/c/kolo.h"

namespace kolo::bench {

struct SweepOptions {
  Collective collective = Collective::kAllreduce;
  size_t min_bytes = 4096;
  size_t max_bytes = 256u << 20;
  double step_factor = 4;
  int iters = 20;
  // Untimed: first touches, and the arena's first calls of a size, which
  // try each way of writing its slots and then its results
  // (collectives/arena_writes.h) before they keep to the faster.
  int warmup = 10;
  kolo_dtype_t dtype = KOLO_FLOAT32;
  kolo_op_t op = KOLO_SUM;
  // allreduce: what it carries (kolo_allreduce_wire); KOLO_WIRE_DEFAULT:
  // the communicator's (KOLO_WIRE_FORMAT). busbw stays in the dtype's
  // bytes: with a format, the effective bandwidth.
  kolo_wire_format_t wire = KOLO_WIRE_DEFAULT;
  bool check = true;
  bool in_place = false;  // allreduce: sendbuf == recvbuf (the peers' benchmarks call it so)
  bool declare_buffers = true;  // kolo_comm_register_memory (RDMA: no staging copy); --staged: off
  double link_gbps = 0;  // total throughput of the links, for the %ideal column
  bool progress = false;
};

struct SweepRow {
  size_t bytes = 0;
  size_t count = 0;       // elements per rank buffer
  double time_s = 0;      // max over ranks of each rank's median
  double spread = 0;      // slowest rank's (max - min) / median
  double algbw = 0;       // GB/s
  double busbw = 0;       // GB/s
  double ideal_pct = 0;   // 0 when no --link-gbps
  bool checked = false;
  bool ok = true;
  std::string algorithm;  // allreduce's schedule at this size; empty for the other collectives
};

// Runs the sweep on every rank; rows are complete (max over ranks) on all.
// Fails only if kolo fails; wrong results are reported in the rows.
kolo_result_t run_sweep(kolo_comm_t comm, const SweepOptions& o, std::vector<SweepRow>* rows);

}  // namespace kolo::bench
