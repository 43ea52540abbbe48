// The ring schedule's bookkeeping: what it costs to work out, for one
// allreduce, every (step, segment) element range a rank sends and receives.
//
// ring_allreduce does this once per call before any byte moves (building its
// pipeline plan), so this is pure per-call overhead. It is measured for a
// 64 MiB float32 buffer with 512 KiB segments, as rank 0 of N ranks:
//   2(N-1) steps, the first N-1 reduce-scatter, the rest allgather, each over
//   layout.segments() segments, and one send and one receive range per unit.
// N=2 has few steps of many segments (chunks of 32 MiB), N=64 many steps of
// few segments (chunks of 1 MiB), so the two ends of the trade-off show.
//
// Reported: time per allreduce (the benchmark's own time), items/s where an
// item is one step, and the counters per_step and per_unit (seconds per step
// and per (step, segment) unit).

#include <benchmark/benchmark.h>

#include <cstddef>

#include "collectives/ring_schedule.h"

namespace {

constexpr size_t kBufferBytes = size_t{64} << 20;
constexpr size_t kSegmentBytes = size_t{512} << 10;
constexpr size_t kElemSize = sizeof(float);

void BM_allreduce_schedule(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int rank = 0;
  const size_t count = kBufferBytes / kElemSize;
  const int rs_steps = n - 1;
  const int steps = 2 * rs_steps;
  size_t units = 0;

  for (auto _ : state) {
    // The layout is built per call in ring_allreduce too, so it is timed.
    kolo::RingLayout layout(count, n, kElemSize, kSegmentBytes);
    // A running sum of everything computed keeps the compiler from dropping
    // the ranges; it costs one add per value, negligible next to partition().
    size_t checksum = 0;
    units = 0;
    for (int st = 0; st < steps; ++st) {
      // The chunk indices depend only on the step; the segment ranges on
      // both, exactly as reduce_scatter_unit / allgather_unit ask for them.
      const bool rs = st < rs_steps;
      const int s = rs ? st : st - rs_steps;
      const int send_chunk = rs ? kolo::rs_send_chunk(rank, n, s) : kolo::ag_send_chunk(rank, n, s);
      const int recv_chunk = rs ? kolo::rs_recv_chunk(rank, n, s) : kolo::ag_recv_chunk(rank, n, s);
      for (size_t j = 0; j < layout.segments(); ++j) {
        const kolo::Range send = layout.segment(send_chunk, j);
        const kolo::Range recv = layout.segment(recv_chunk, j);
        checksum += send.offset + send.count + recv.offset + recv.count;
        ++units;
      }
    }
    benchmark::DoNotOptimize(checksum);
  }

  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * steps);
  // kIsIterationInvariantRate multiplies by iterations and divides by time
  // (steps per second); kInvert turns that into seconds per step.
  using C = benchmark::Counter;
  state.counters["steps"] = static_cast<double>(steps);
  state.counters["units"] = static_cast<double>(units);
  state.counters["per_step"] = C(static_cast<double>(steps), C::kIsIterationInvariantRate | C::kInvert);
  state.counters["per_unit"] = C(static_cast<double>(units), C::kIsIterationInvariantRate | C::kInvert);
}

BENCHMARK(BM_allreduce_schedule)->Name("schedule/allreduce/float32/67108864")->ArgName("ranks")->Arg(2)->Arg(8)->Arg(64);

}  // namespace
