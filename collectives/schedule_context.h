// What every schedule (ring, recursive doubling, the arena, hierarchical,
// rooted chains, point-to-point) runs with: the transport, this rank's
// place and neighbours, the pipeline's tuning and the memory the call's
// buffers live in. Which schedule runs is the algorithm tables' business
// (algorithms.h), from the communicator's Topology.
#pragma once

#include <chrono>
#include <cstddef>

#include "collectives/memory.h"
#include "collectives/pipeline.h"
#include "transport/transport.h"

namespace kolo {

struct ScheduleContext {
  Transport* transport;
  int rank;
  int size;
  int left;   // rank - 1
  int right;  // rank + 1
  size_t segment_bytes;
  size_t cache_bytes = size_t{1} << 20;  // pipeline_cache_bytes of this machine
  PipelineOptions pipeline;
  // Holds every buffer the call names (host memory, or a GPU's), and the
  // scratch space of the same kind.
  Memory* memory;
  // Optional: the ring allreduce writes the time its reduce-scatter phase
  // ended here (left unchanged when recursive doubling runs instead).
  std::chrono::steady_clock::time_point* reduce_scatter_done = nullptr;
};

}  // namespace kolo
