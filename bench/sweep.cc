#include "bench/sweep.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench/values.h"

namespace kolo::bench {
namespace {

// Inputs: small integers whose reduction is exact in every dtype, so the
// check is exact (but for the average of floating types, which is rounded
// once by the dtype). Products stay at 2: one rank contributes 2, the rest 1.
int input(kolo_op_t op, int rank, int ranks, size_t i) {
  switch (op) {
    case KOLO_PROD: return static_cast<int>(i % static_cast<size_t>(ranks)) == rank ? 2 : 1;
    case KOLO_MIN:
    case KOLO_MAX: return static_cast<int>((static_cast<size_t>(rank) * 3 + i) % 11);
    default: return static_cast<int>((static_cast<size_t>(rank) + i % 7) % 5);
  }
}

double reduced(kolo_op_t op, kolo_dtype_t d, int ranks, size_t i) {
  double acc = input(op, 0, ranks, i);
  for (int r = 1; r < ranks; ++r) {
    const double v = input(op, r, ranks, i);
    switch (op) {
      case KOLO_PROD: acc *= v; break;
      case KOLO_MIN: acc = std::min(acc, v); break;
      case KOLO_MAX: acc = std::max(acc, v); break;
      default: acc += v;
    }
  }
  if (op == KOLO_AVG) acc = is_integer(d) ? std::trunc(acc / ranks) : acc / ranks;
  return acc;
}

// What a wire format may lose, relative to the largest partial sum (each
// element is encoded once per rank): 0 for the elements themselves.
double wire_tolerance(kolo_wire_format_t wire) {
  if (wire == KOLO_WIRE_DEFAULT) {
    // The communicator's default comes from the environment.
    const char* v = std::getenv("KOLO_WIRE_FORMAT");
    const std::string name = v ? v : "native";
    wire = name == "bf16" ? KOLO_WIRE_BF16 : name == "fp16" ? KOLO_WIRE_FP16 : name == "fp8_e4m3" ? KOLO_WIRE_FP8_E4M3
         : name == "fp8_e5m2" ? KOLO_WIRE_FP8_E5M2 : name == "int8" ? KOLO_WIRE_INT8 : KOLO_WIRE_NATIVE;
  }
  switch (wire) {
    case KOLO_WIRE_BF16: return 1.0 / 256;
    case KOLO_WIRE_FP16: return 1.0 / 1024;
    case KOLO_WIRE_FP8_E4M3: return 1.0 / 14;
    case KOLO_WIRE_FP8_E5M2: return 1.0 / 7;
    case KOLO_WIRE_INT8: return 1.0 / 200;
    default: return 0;
  }
}

bool close_enough(kolo_dtype_t d, double got, double want, double wire_slack) {
  if (is_integer(d)) return got == want;
  const double tol = (d == KOLO_FLOAT16 || d == KOLO_BFLOAT16) ? 1e-2 : 1e-6;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want)) + wire_slack;
}

// Declares a buffer to kolo while it lives, as a framework that registers
// its gradient buffers does: over RDMA it is then registered once and moves
// with no staging copy. Destroyed before the buffer is freed.
class Declared {
 public:
  Declared(kolo_comm_t comm, std::vector<unsigned char>& buffer, bool on)
      : comm_(comm), buffer_(buffer), on_(on && kolo_comm_register_memory(comm, buffer.data(), buffer.size()) ==
                                                     KOLO_SUCCESS) {}
  ~Declared() {
    if (on_) kolo_comm_deregister_memory(comm_, buffer_.data(), buffer_.size());
  }
  Declared(const Declared&) = delete;
  Declared& operator=(const Declared&) = delete;

 private:
  kolo_comm_t comm_;
  std::vector<unsigned char>& buffer_;
  bool on_;
};

}  // namespace

kolo_result_t run_sweep(kolo_comm_t comm, const SweepOptions& o, std::vector<SweepRow>* rows) {
  int rank = 0, n = 1;
  kolo_comm_rank(comm, &rank);
  kolo_comm_size(comm, &n);
  const size_t es = dtype_bytes(o.dtype);
  const double factor = bus_factor(o.collective, n);
  rows->clear();
  for (double sz = static_cast<double>(o.min_bytes); sz <= o.max_bytes * 1.0000001; sz *= o.step_factor) {
    // Whole elements; and for the collectives that split the buffer into
    // N blocks (allgather, reduce-scatter, ...), whole blocks.
    const bool whole_buffer = o.collective == Collective::kAllreduce || o.collective == Collective::kBroadcast ||
                              o.collective == Collective::kReduce;
    const size_t unit = whole_buffer ? es : es * n;
    const size_t bytes = static_cast<size_t>(sz) / unit * unit;
    if (bytes == 0) continue;
    const size_t count = bytes / es;
    const size_t block = count / n;
    std::vector<unsigned char> send(bytes), recv(bytes);
    // The v forms' arguments: equal blocks, packed.
    std::vector<size_t> blocks(n, block), displs(n);
    for (int q = 0; q < n; ++q) displs[q] = q * block;
    Declared declared_send(comm, send, o.declare_buffers), declared_recv(comm, recv, o.declare_buffers);
    auto run_once = [&]() -> kolo_result_t {
      switch (o.collective) {
        case Collective::kAllreduce:
          return kolo_allreduce_wire(comm, o.in_place ? recv.data() : send.data(), recv.data(), count, o.dtype, o.op,
                                     o.wire, nullptr);
        case Collective::kAllgather: return kolo_allgather(comm, send.data(), recv.data(), block, o.dtype);
        case Collective::kBroadcast: return kolo_broadcast(comm, recv.data(), count, o.dtype, 0);
        case Collective::kReduceScatter:
          return kolo_reduce_scatter(comm, send.data(), recv.data(), block, o.dtype, o.op);
        case Collective::kReduce: return kolo_reduce(comm, send.data(), recv.data(), count, o.dtype, o.op, 0);
        case Collective::kGather: return kolo_gather(comm, send.data(), recv.data(), block, o.dtype, 0);
        case Collective::kScatter: return kolo_scatter(comm, send.data(), recv.data(), block, o.dtype, 0);
        case Collective::kAllgatherv:
          return kolo_allgatherv(comm, send.data(), block, recv.data(), blocks.data(), displs.data(), o.dtype);
        case Collective::kReduceScatterv:
          return kolo_reduce_scatterv(comm, send.data(), recv.data(), blocks.data(), o.dtype, o.op);
        case Collective::kAlltoall: return kolo_alltoall(comm, send.data(), recv.data(), block, o.dtype);
        case Collective::kAlltoallv:
          return kolo_alltoallv(comm, send.data(), blocks.data(), displs.data(), recv.data(), blocks.data(),
                                displs.data(), o.dtype);
      }
      return KOLO_ERR_INVALID_ARGUMENT;
    };
    SweepRow row;
    row.bytes = bytes;
    row.count = count;
    const char* algorithm = nullptr;
    if (o.collective == Collective::kAllreduce && kolo_comm_get_allreduce_algorithm(comm, bytes, &algorithm) == 0) {
      row.algorithm = algorithm;
    }
    bool ok = true;
    if (o.check) {
      // Allgather sends one block; broadcast's root sends everything.
      const Collective c = o.collective;
      const bool one_block = c == Collective::kAllgather || c == Collective::kAllgatherv || c == Collective::kGather;
      const bool reducing = c == Collective::kAllreduce || c == Collective::kReduceScatter ||
                            c == Collective::kReduceScatterv || c == Collective::kReduce;
      const size_t fill = one_block ? block : count;
      const kolo_op_t fill_op = reducing ? o.op : KOLO_SUM;
      for (size_t i = 0; i < fill; ++i) set_value(o.dtype, send.data(), i, input(fill_op, rank, n, i));
      if (o.collective == Collective::kBroadcast || o.in_place) std::memcpy(recv.data(), send.data(), bytes);
      if (kolo_result_t r = run_once()) return r;
      size_t out = c == Collective::kReduceScatter || c == Collective::kReduceScatterv || c == Collective::kScatter
                       ? block
                       : count;
      if ((c == Collective::kReduce || c == Collective::kGather) && rank != 0) out = 0;  // root's result only
      for (size_t i = 0; i < out && ok; ++i) {
        double want = 0;
        switch (o.collective) {
          case Collective::kAllreduce: want = reduced(o.op, o.dtype, n, i); break;
          case Collective::kReduceScatter: want = reduced(o.op, o.dtype, n, rank * block + i); break;
          case Collective::kAllgather: want = input(KOLO_SUM, static_cast<int>(i / block), n, i % block); break;
          case Collective::kBroadcast: want = input(KOLO_SUM, 0, n, i); break;
          case Collective::kReduce: want = reduced(o.op, o.dtype, n, i); break;
          case Collective::kReduceScatterv: want = reduced(o.op, o.dtype, n, rank * block + i); break;
          case Collective::kAllgatherv:
          case Collective::kGather: want = input(KOLO_SUM, static_cast<int>(i / block), n, i % block); break;
          case Collective::kScatter: want = input(KOLO_SUM, 0, n, rank * block + i); break;
          case Collective::kAlltoall:
          case Collective::kAlltoallv:
            want = input(KOLO_SUM, static_cast<int>(i / block), n, rank * block + i % block);
            break;
        }
        // The inputs are below 5: no partial sum exceeds 4N.
        const double slack = reducing ? wire_tolerance(o.wire) * n * 4.0 * n : 0;
        ok = close_enough(o.dtype, get_value(o.dtype, recv.data(), i), want, slack);
      }
      row.checked = true;
    }
    // Fewer iterations for big sizes: about a GiB of traffic per row at most.
    const int iters = std::max(3, std::min(o.iters, static_cast<int>((size_t{1} << 30) / bytes)));
    for (int i = 0; i < o.warmup; ++i) {
      if (kolo_result_t r = run_once()) return r;
    }
    std::vector<double> t(iters);
    for (int i = 0; i < iters; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      if (kolo_result_t r = run_once()) return r;
      t[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    const double med = median(t);
    const auto mm = std::minmax_element(t.begin(), t.end());
    double mine[3] = {med, (*mm.second - *mm.first) / med, ok ? 0.0 : 1.0};
    double worst[3];
    if (kolo_result_t r = kolo_allreduce(comm, mine, worst, 3, KOLO_FLOAT64, KOLO_MAX)) return r;
    row.time_s = worst[0];
    row.spread = worst[1];
    row.ok = worst[2] == 0;
    row.algbw = algbw_gbps(static_cast<double>(bytes), row.time_s);
    row.busbw = row.algbw * factor;
    if (o.link_gbps > 0) {
      row.ideal_pct = 100.0 * bytes_on_links(o.collective, n, static_cast<double>(bytes)) / (o.link_gbps * 1e9) /
                      row.time_s;
    }
    rows->push_back(row);
    if (o.progress && rank == 0) {
      std::fprintf(stderr, "kolo_bench: %zu bytes done (%.1f ms each)\n", bytes, row.time_s * 1e3);
    }
  }
  return KOLO_SUCCESS;
}

}  // namespace kolo::bench
