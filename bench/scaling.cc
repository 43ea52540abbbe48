#include "bench/scaling.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "bench/models.h"
#include "bench/over_ranks.h"
#include "bench/simulator.h"

namespace kolo::bench {
namespace {

using Clock = std::chrono::steady_clock;

void sleep_until(Clock::time_point t) { std::this_thread::sleep_until(t); }

Clock::time_point after(Clock::time_point t, double s) {
  return t + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

// One emulated step; with `communicate` false it is the one-rank baseline.
kolo_result_t step(kolo_comm_t comm, double forward_s, double backward_s, const std::vector<Bucket>& buckets,
                   std::vector<float>& grads, bool communicate, double* seconds) {
  const auto start = Clock::now();
  const auto backward_start = after(start, forward_s);
  size_t offset = 0;
  for (const auto& b : buckets) {
    sleep_until(after(backward_start, b.ready_s));
    if (communicate) {
      if (kolo_result_t r = kolo_allreduce(comm, grads.data() + offset, grads.data() + offset, b.elements,
                                           KOLO_FLOAT32, KOLO_AVG)) {
        return r;
      }
    }
    offset += b.elements;
  }
  sleep_until(after(backward_start, backward_s));  // the backward pass itself ends here at the earliest
  *seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return KOLO_SUCCESS;
}

// Times one allreduce of `bytes` (median of a few), max over ranks.
kolo_result_t time_allreduce(kolo_comm_t comm, size_t bytes, double* seconds) {
  std::vector<float> buf(std::max<size_t>(1, bytes / sizeof(float)));
  std::vector<double> t;
  for (int i = 0; i < 7; ++i) {
    auto t0 = Clock::now();
    if (kolo_result_t r = kolo_allreduce(comm, buf.data(), buf.data(), buf.size(), KOLO_FLOAT32, KOLO_SUM)) return r;
    if (i >= 2) t.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return max_over_ranks(comm, median(t), seconds);
}

}  // namespace

// Packs gradients (backprop order) into buckets of at least bucket_bytes,
// the last one taking what is left. A bucket is ready when its last
// gradient is; gradient g is ready when the backward pass has done the
// share of the model's multiply-adds that its layer and those before it
// (in backprop order) represent.
std::vector<Bucket> make_buckets(const ModelProfile& m, double backward_s, double bucket_bytes) {
  const double total = m.total_macs();
  std::vector<Bucket> buckets;
  Bucket current;
  double done = 0;
  for (const auto& g : m.gradients) {
    current.elements += g.elements;
    done += g.macs;
    current.ready_s = backward_s * done / total;
    if (current.elements * sizeof(float) >= bucket_bytes) {
      buckets.push_back(current);
      current = Bucket();
    }
  }
  if (current.elements) buckets.push_back(current);
  return buckets;
}

kolo_result_t run_scaling(kolo_comm_t comm, const ScalingOptions& o, std::vector<ScalingResult>* results) {
  int rank = 0, n = 1;
  kolo_comm_rank(comm, &rank);
  kolo_comm_size(comm, &n);
  results->clear();

  // The ring's latency and bandwidth as this run sees them, for predictions.
  RingModel fitted;
  if (o.predict_ranks > 0 && n > 1) {
    const double small = 4096, large = 32 << 20;
    double ts = 0, tl = 0;
    if (kolo_result_t r = time_allreduce(comm, static_cast<size_t>(small), &ts)) return r;
    if (kolo_result_t r = time_allreduce(comm, static_cast<size_t>(large), &tl)) return r;
    fitted = RingModel::fit(n, small, ts, large, tl);
  }

  for (const auto& name : o.models) {
    const ModelProfile* m = find_model(name);
    if (!m) return KOLO_ERR_INVALID_ARGUMENT;
    ScalingResult res;
    res.model = m->name;
    res.parameters = m->total_parameters();
    res.gradients = m->gradients.size();
    const double compute_s =
        o.compute_ms > 0 ? o.compute_ms / 1e3 : (m->forward_ms + m->backward_ms) / 1e3 * o.compute_scale;
    const double forward_share = o.compute_ms > 0 ? 1.0 / 3 : m->forward_ms / (m->forward_ms + m->backward_ms);
    res.forward_s = compute_s * forward_share;
    res.backward_s = compute_s - res.forward_s;
    const auto buckets = make_buckets(*m, res.backward_s, o.bucket_mb * (1 << 20));
    res.buckets = buckets.size();
    std::vector<float> grads(res.parameters, 1.0f);

    std::vector<double> alone, together;
    for (int s = 0; s <= o.steps; ++s) {  // step 0 warms up
      double t1 = 0, tn = 0;
      if (kolo_result_t r = step(comm, res.forward_s, res.backward_s, buckets, grads, false, &t1)) return r;
      if (kolo_result_t r = step(comm, res.forward_s, res.backward_s, buckets, grads, true, &tn)) return r;
      if (s > 0) {
        alone.push_back(t1);
        together.push_back(tn);
      }
      if (o.progress && rank == 0) {
        std::fprintf(stderr, "kolo_bench: %s step %d/%d: %.1f ms\n", m->name.c_str(), s, o.steps, tn * 1e3);
      }
    }
    if (kolo_result_t r = max_over_ranks(comm, median(alone), &res.t1_s)) return r;
    if (kolo_result_t r = max_over_ranks(comm, median(together), &res.tn_s)) return r;
    res.efficiency = res.t1_s / res.tn_s;

    if (o.predict_ranks > 0 && n > 1) {
      // Each bucket's allreduce at predict_ranks ranks, one per host, over
      // links with this run's fitted latency and bandwidth (the reduction's
      // cost is in the fit), simulated: kolo's own schedules and the cost
      // model's choice among them, not a curve.
      SimulatedNetwork net;
      net.hosts = o.predict_ranks;
      net.ranks_per_host = 1;
      net.remote = net.local = {fitted.hop_latency_s, fitted.link_bytes_per_s};
      net.reduce_bytes_per_s = net.copy_bytes_per_s = 1e15;
      std::vector<double> ready, comm_s;
      std::map<size_t, double> simulated;  // by bucket size
      for (const auto& b : buckets) {
        const size_t bytes = b.elements * sizeof(float);
        if (!simulated.count(bytes)) {
          SimulatedRun run;
          if (!simulate_allreduce(net, "auto", bytes, &run).is_ok()) return KOLO_ERR_INTERNAL;
          simulated[bytes] = run.seconds;
        }
        ready.push_back(b.ready_s);
        comm_s.push_back(simulated[bytes]);
      }
      // The prediction keeps this run's measured one-rank step as T(1).
      const double overhead = res.t1_s - (res.forward_s + res.backward_s);
      res.predicted_ranks = o.predict_ranks;
      res.predicted_tn_s = overlapped_step_seconds(res.forward_s, res.backward_s, ready, comm_s) + overhead;
      res.predicted_efficiency = res.t1_s / res.predicted_tn_s;
      res.fitted = fitted;
    }
    results->push_back(res);
  }
  return KOLO_SUCCESS;
}

}  // namespace kolo::bench
