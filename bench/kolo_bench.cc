// kolo_bench: bus bandwidth per message size (sweep) and the scaling
// efficiency of emulated data-parallel training (scaling). One process per
// rank, rendezvous from the environment: start it with kolorun or any
// launcher kolo understands. Uses only the public C API. --help explains
// every flag and formula.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/fusion.h"
#include "bench/models.h"
#include "bench/report.h"
#include "bench/scaling.h"
#include "bench/simulate.h"
#include "bench/sweep.h"
#include "bench/values.h"
#include "bindings/c/kolo.h"

namespace {

using namespace kolo::bench;

const char kHelp[] = R"(usage: kolo_bench [sweep|scaling|fusion] [flags]     (one process per rank; e.g. kolorun -np 4 kolo_bench)
       kolo_bench simulate [flags]                    (one process: the simulator)

sweep (default): one collective over a range of sizes, as nccl-tests does.
  --collective C    allreduce (default), allgather, broadcast, reduce_scatter, reduce,
                    gather, scatter, allgatherv, reduce_scatterv, alltoall, alltoallv
                    (rooted ones at root 0; the v forms with equal counts)
  --min-bytes N     smallest size (default 4K; K/M/G suffixes)
  --max-bytes N     largest size (default 256M)
  --step-factor F   size multiplier between rows (default 4)
  --iters N         timed iterations per size (default 20; fewer for big sizes,
                    about 1 GiB of data per row at most, never below 3)
  --warmup N        untimed iterations per size (default 10: the arena tries its ways first)
  --dtype T         int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32 (default) float64
  --op O            sum (default) prod min max avg
  --wire F          allreduce: native, bf16, fp16, fp8_e4m3, fp8_e5m2 or int8 on the
                    wire (default: KOLO_WIRE_FORMAT's); busbw then counts the dtype's
                    bytes (effective bandwidth), and the check allows the format's error
  --no-check        skip the correctness check (by default each size is checked
                    once against values computed independently, for any dtype and op)
  --in-place        allreduce: sendbuf == recvbuf, as Open MPI's (bench/peers/mpi_bench.c)
                    and Gloo's benchmarks call it (by default two buffers, as
                    nccl-tests does); the check runs on the first call, and later
                    calls keep reducing the result into itself
  --staged          do not declare the buffers (kolo_comm_register_memory): over
                    RDMA every message is then copied through kolo's staging rings
  --link-gbps G     what the links carry in total (e.g. bench/peers/tcp_ceiling's
                    two-stream figure on loopback): adds the %ideal column
  --plot FILE.png   draw busbw against size (gnuplot)
  size is the per-rank buffer: the allreduce/broadcast buffer, the allgather
  output, the reduce_scatter input.
  time  = the largest, over ranks, of each rank's median iteration time;
  spread = the slowest rank's (max - min) / median.
  algbw = size / time (GB = 1e9 bytes)
  busbw = algbw x factor: allreduce 2(N-1)/N, allgather and reduce_scatter
          (N-1)/N, broadcast 1 (nccl-tests' definitions)
  ideal% = (bytes the algorithm must move over links / link throughput) / time;
           an allreduce moves 2(N-1) x size bytes in all.

scaling: emulated data-parallel training steps of real models' gradients.
  --model M         resnet50, resnet101, inception_v3, vgg16 or all (default all)
  --steps N         timed steps per model (default 5, after one warm-up step)
  --bucket-mb B     fusion bucket: gradients are packed in backprop order into
                    buckets of about B MiB (default 25), each allreduced when its
                    last gradient is ready, overlapping the backward pass
  --compute-scale S multiply the model's compute time (default 1: one P100 GPU at
                    batch 64). Keep the compute-to-bandwidth ratio of a real
                    cluster on slower links: e.g. 25 Gbit/s RoCE emulated on
                    1 Gbit/s links is --compute-scale 25.
  --compute-ms T    the step's compute time instead (1/3 forward, 2/3 backward)
  --predict-ranks P also print a PREDICTION for P ranks: the ring's hop latency
                    and link bandwidth are fitted from this run
                    (t = 2(N-1) latency + 2(N-1)/N x bytes / bandwidth), each
                    bucket's allreduce is simulated over such links at P ranks
                    on P hosts (see simulate; the cost model picks the
                    algorithm), and the step is recomputed with those times.
  T(1) = the same steps on one rank with no communication;
  T(N) = the largest, over ranks, of each rank's median step time;
  efficiency = T(1) / T(N).

simulate: kolo's own allreduce code, one fiber per rank, over a modelled
  network in virtual time (bench/simulator.h): each algorithm's time per size,
  what the cost model chose (auto) and how far that is from the best; with
  --model, the scaling efficiency of training per schedule.
  --layout HxL      H hosts of L ranks (default 8x1)
  --links SPEC      local=US/GBPS,remote=US/GBPS (as KOLO_LINK_COSTS; default
                    shared memory's and 10 Gbit/s TCP's defaults)
  --reduce-gbps G   one rank's reduction speed (default 8)
  --segment-bytes N KOLO_SEGMENT_BYTES (default 2M)
  --cache-bytes N   half of a core's L2 cache (default 1M)
  --algorithms LIST comma-separated (default ring,recursive_doubling,halving_doubling,tree,
                    hierarchical)
  --min-bytes, --max-bytes, --step-factor as for sweep (default 8 to 256M, x4)
  --model M, --bucket-mb B, --compute-scale S as for scaling (no default model)
  --horovod         the Horovod paper's setting: 128 hosts x 4 GPUs, 25 Gbit/s
                    RoCE (10 us), PCIe within a host (5 us, 10 GB/s), reductions
                    on the GPU (200 GB/s), 64 MiB fusion buffers, ResNet-101,
                    Inception V3 and VGG-16 beside the efficiencies it reported

fusion: a training step's gradients as named allreduces through the runtime
  engine (as a framework's backprop hooks submit them), against one
  synchronous allreduce of the same total size in the same run.
  --model M         as above (default resnet50: 161 tensors, 25.6M parameters)
  --steps N         timed steps (default 5, after 2 warm-up steps)
  Fusion is on unless KOLO_FUSION_THRESHOLD=0. Also prints the engine's
  rounds, cache hits and negotiation time per step (cache warm).

all modes:
  --json FILE       write the results as JSON (rank 0)
  --progress        a progress line per size or step on stderr (rank 0)
)";

size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  std::string suf(end);
  if (suf == "K" || suf == "k") v *= 1024;
  else if (suf == "M" || suf == "m") v *= 1024 * 1024;
  else if (suf == "G" || suf == "g") v *= 1024.0 * 1024 * 1024;
  else if (!suf.empty() || v < 0) {
    std::fprintf(stderr, "kolo_bench: bad size '%s'\n", s);
    std::exit(2);
  }
  return static_cast<size_t>(v);
}

[[noreturn]] void usage_error(const std::string& what) {
  std::fprintf(stderr, "kolo_bench: %s (see --help)\n", what.c_str());
  std::exit(2);
}

// "a,b,c" as its parts (empty ones kept, so that a stray comma is refused
// by name where each part is checked).
std::vector<std::string> comma_separated(const std::string& v) {
  std::vector<std::string> parts;
  for (size_t at = 0; at <= v.size();) {
    const size_t end = std::min(v.find(',', at), v.size());
    parts.push_back(v.substr(at, end - at));
    at = end + 1;
  }
  return parts;
}

int lookup(const char* const* names, int count, const std::string& v, const char* what) {
  for (int k = 0; k < count; ++k) {
    if (v == names[k]) return k;
  }
  usage_error(std::string("unknown ") + what + " '" + v + "'");
}


}  // namespace

int main(int argc, char** argv) {
  std::string mode = "sweep", json, plot, model = "all";
  SweepOptions sw;
  ScalingOptions sc;
  FusionOptions fu;
  bool progress = false;
  int first = 1;
  if (argc > 1 && argv[1][0] != '-') {
    mode = argv[1];
    first = 2;
    if (mode != "sweep" && mode != "scaling" && mode != "fusion" && mode != "simulate") {
      usage_error("unknown mode '" + mode + "'");
    }
  }
  SimulateOptions si;
  si.network.hosts = 8;  // --layout's default, as --help says
  bool model_given = false, bucket_given = false;
  std::string links;
  for (int i = first; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) usage_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::fputs(kHelp, stdout);
      return 0;
    } else if (a == "--collective") {
      if (!parse_collective(next(), &sw.collective)) usage_error("unknown collective");
    } else if (a == "--min-bytes") sw.min_bytes = parse_size(next());
    else if (a == "--max-bytes") sw.max_bytes = parse_size(next());
    else if (a == "--step-factor") sw.step_factor = std::atof(next());
    else if (a == "--iters") sw.iters = std::atoi(next());
    else if (a == "--warmup") sw.warmup = std::atoi(next());
    else if (a == "--dtype") sw.dtype = static_cast<kolo_dtype_t>(lookup(kDtypeNames, 10, next(), "dtype"));
    else if (a == "--op") sw.op = static_cast<kolo_op_t>(lookup(kOpNames, 5, next(), "op"));
    else if (a == "--wire") {
      static const char* const kWireNames[] = {"native", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2", "int8"};
      sw.wire = static_cast<kolo_wire_format_t>(lookup(kWireNames, 6, next(), "wire format"));
    } else if (a == "--check") sw.check = true;
    else if (a == "--no-check") sw.check = false;
    else if (a == "--staged") sw.declare_buffers = false;
    else if (a == "--in-place") sw.in_place = true;
    else if (a == "--link-gbps") sw.link_gbps = std::atof(next());
    else if (a == "--plot") plot = next();
    else if (a == "--model") model = next(), model_given = true;
    else if (a == "--layout") {
      const std::string v = next();
      const size_t x = v.find('x');
      si.network.hosts = std::atoi(v.substr(0, x).c_str());
      si.network.ranks_per_host = x == std::string::npos ? 0 : std::atoi(v.substr(x + 1).c_str());
      if (si.network.hosts < 1 || si.network.ranks_per_host < 1) usage_error("--layout needs HxL, e.g. 128x4");
    } else if (a == "--links") links = next();
    else if (a == "--reduce-gbps") si.network.reduce_bytes_per_s = std::atof(next()) * 1e9;
    else if (a == "--segment-bytes") si.network.segment_bytes = parse_size(next());
    else if (a == "--cache-bytes") si.network.cache_bytes = parse_size(next());
    else if (a == "--algorithms") {
      si.algorithms = comma_separated(next());
    } else if (a == "--horovod") {
      si.network.hosts = 128;
      si.network.ranks_per_host = 4;
      links = "local=5/10,remote=10/3.125";
      si.network.reduce_bytes_per_s = si.network.copy_bytes_per_s = 200e9;
      if (!model_given) model = "resnet101,inception_v3,vgg16", model_given = true;
      if (!bucket_given) sc.bucket_mb = 64;
      si.reported = {{"resnet101", 90}, {"inception_v3", 90}, {"vgg16", 68}};
    }
    else if (a == "--steps") sc.steps = std::atoi(next());
    else if (a == "--bucket-mb") sc.bucket_mb = std::atof(next()), bucket_given = true;
    else if (a == "--compute-scale") sc.compute_scale = std::atof(next());
    else if (a == "--compute-ms") sc.compute_ms = std::atof(next());
    else if (a == "--predict-ranks") sc.predict_ranks = std::atoi(next());
    else if (a == "--json") json = next();
    else if (a == "--progress") progress = true;
    else usage_error("unknown flag '" + a + "'");
  }
  if (sw.step_factor <= 1 || sw.min_bytes == 0 || sw.max_bytes < sw.min_bytes || sw.iters < 1 || sw.warmup < 0) {
    usage_error("need --step-factor > 1, 0 < --min-bytes <= --max-bytes, --iters >= 1, --warmup >= 0");
  }
  if (sw.in_place && sw.collective != kolo::bench::Collective::kAllreduce) usage_error("--in-place is for allreduce");
  if (sc.steps < 1 || sc.bucket_mb <= 0 || sc.compute_scale <= 0 || sc.compute_ms < 0 || sc.predict_ranks < 0) {
    usage_error("need --steps >= 1, --bucket-mb > 0, --compute-scale > 0, --compute-ms >= 0, --predict-ranks >= 0");
  }
  if (mode == "simulate") {
    if (!links.empty()) {
      kolo::CostModel costs;
      costs.local = si.network.local;
      costs.remote = si.network.remote;
      kolo::Status s = kolo::parse_link_costs(links, &costs);
      if (!s.is_ok()) usage_error("--links: " + s.message());
      si.network.local = costs.local;
      si.network.remote = costs.remote;
    }
    for (const std::string& one : model_given ? comma_separated(model) : std::vector<std::string>{}) {
      if (one == "all") {
        si.models = model_names();
      } else if (find_model(one)) {
        si.models.push_back(one);
      } else {
        usage_error("unknown model '" + one + "'");
      }
    }
    if (bucket_given || !si.reported.empty()) si.bucket_mb = sc.bucket_mb;
    si.compute_scale = sc.compute_scale;
    if (sw.min_bytes != SweepOptions().min_bytes) si.min_bytes = sw.min_bytes;
    if (sw.max_bytes != SweepOptions().max_bytes) si.max_bytes = sw.max_bytes;
    if (sw.step_factor != SweepOptions().step_factor) si.step_factor = sw.step_factor;
    for (const auto& a : si.algorithms) {
      if (a != "ring" && a != "recursive_doubling" && a != "halving_doubling" && a != "tree" && a != "hierarchical") {
        usage_error("--algorithms: '" + a + "' is not ring, recursive_doubling, halving_doubling, tree or hierarchical");
      }
    }
    return run_simulate(si) ? 0 : 1;
  }
  if (model == "all") sc.models = model_names();
  else if (find_model(model)) sc.models = {model};
  else usage_error("unknown model '" + model + "'");
  fu.model = model == "all" ? "resnet50" : model;
  fu.steps = sc.steps;
  sw.progress = sc.progress = fu.progress = progress;

  kolo_comm_t comm;
  if (kolo_result_t r = kolo_comm_init_from_env(&comm)) {
    std::fprintf(stderr, "kolo_bench: %s: %s\n", kolo_result_string(r), kolo_last_error());
    return 1;
  }
  int rank = 0, n = 1;
  kolo_comm_rank(comm, &rank);
  kolo_comm_size(comm, &n);
  int status = 0;
  kolo_result_t r = KOLO_SUCCESS;
  std::string text;
  if (mode == "sweep") {
    std::vector<SweepRow> rows;
    r = run_sweep(comm, sw, &rows);
    if (r == KOLO_SUCCESS && rank == 0) {
      const char* transport = "?";
      kolo_comm_get_transport(comm, &transport);
      print_sweep(sw, n, transport, rows);
      text = sweep_json(sw, n, transport, rows);
      if (!plot.empty() && !plot_sweep(sw, n, rows, plot)) status = 1;
    }
    for (const auto& row : rows) {
      if (!row.ok) status = 1;
    }
    if (status && rank == 0) std::fprintf(stderr, "kolo_bench: some sizes gave wrong results\n");
  } else if (mode == "fusion") {
    FusionResult result;
    r = run_fusion(comm, fu, &result);
    if (r == KOLO_SUCCESS && rank == 0) {
      print_fusion(fu, n, result);
      text = fusion_json(fu, n, result);
    }
    if (r == KOLO_SUCCESS && !result.correct) {
      if (rank == 0) std::fprintf(stderr, "kolo_bench: the engine gave wrong results\n");
      status = 1;
    }
  } else {
    std::vector<ScalingResult> results;
    r = run_scaling(comm, sc, &results);
    if (r == KOLO_SUCCESS && rank == 0) {
      print_scaling(sc, n, results);
      text = scaling_json(sc, n, results);
    }
  }
  if (r != KOLO_SUCCESS) {
    std::fprintf(stderr, "kolo_bench: %s: %s\n", kolo_result_string(r), kolo_last_error());
    status = 1;
  }
  if (rank == 0 && !json.empty() && !text.empty() && !write_file(json, text)) {
    std::fprintf(stderr, "kolo_bench: cannot write %s\n", json.c_str());
    status = 1;
  }
  kolo_comm_destroy(comm);
  return status;
}
