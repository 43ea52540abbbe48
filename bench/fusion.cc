#include "bench/fusion.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "bench/model.h"
#include "bench/over_ranks.h"
#include "bench/models.h"

namespace kolo::bench {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

kolo_result_t run_fusion(kolo_comm_t comm, const FusionOptions& o, FusionResult* res) {
  int rank = 0, n = 1;
  kolo_comm_rank(comm, &rank);
  kolo_comm_size(comm, &n);
  const ModelProfile* model = find_model(o.model);
  const auto& grads = model->gradients;
  *res = FusionResult();
  res->tensors = grads.size();
  res->parameters = model->total_parameters();

  // The reference: one synchronous allreduce of everything at once (before
  // the engine starts, so its thread is not yet there to compete for cores).
  std::vector<float> all(res->parameters, 1.f);
  std::vector<double> single;
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    const auto t0 = Clock::now();
    if (kolo_result_t r = kolo_allreduce(comm, all.data(), all.data(), all.size(), KOLO_FLOAT32, KOLO_SUM)) return r;
    if (s >= o.warmup) single.push_back(seconds_since(t0));
  }
  if (kolo_result_t r = max_over_ranks(comm, median(single), &res->single_s)) return r;

  std::vector<std::vector<float>> in(grads.size()), out(grads.size());
  for (size_t t = 0; t < grads.size(); ++t) {
    in[t].assign(grads[t].elements, static_cast<float>(rank + 1));
    out[t].assign(grads[t].elements, 0.f);
  }
  const float expect = static_cast<float>(n) * (n + 1) / 2;
  std::vector<kolo_handle_t> handles(grads.size());
  std::vector<double> steps;
  kolo_engine_stats_t before{}, after{};
  for (int s = 0; s < o.warmup + o.steps; ++s) {
    if (s == o.warmup) {
      if (kolo_result_t r = kolo_engine_get_stats(comm, &before)) return r;
    }
    const auto t0 = Clock::now();
    for (size_t t = 0; t < grads.size(); ++t) {
      const int64_t count = static_cast<int64_t>(grads[t].elements);
      if (kolo_result_t r = kolo_submit_allreduce(comm, grads[t].name.c_str(), in[t].data(), out[t].data(), 1, &count,
                                                  KOLO_FLOAT32, KOLO_SUM, 1.0, 1.0, &handles[t])) {
        return r;
      }
    }
    for (auto& h : handles) {
      kolo_result_t r = kolo_handle_wait(h, -1);
      kolo_handle_release(h);
      if (r) return r;
    }
    if (s >= o.warmup) steps.push_back(seconds_since(t0));
    for (size_t t = 0; t < grads.size(); ++t) {
      if (out[t].front() != expect || out[t].back() != expect) res->correct = false;
    }
    if (o.progress && rank == 0) std::fprintf(stderr, "fusion: step %d of %d\n", s + 1, o.warmup + o.steps);
  }
  if (kolo_result_t r = kolo_engine_get_stats(comm, &after)) return r;
  if (kolo_result_t r = max_over_ranks(comm, median(steps), &res->step_s)) return r;

  const double k = o.steps;
  res->rounds_per_step = (after.rounds - before.rounds) / k;
  res->message_rounds_per_step = (after.rounds_with_messages - before.rounds_with_messages) / k;
  res->negotiation_s_per_step = (after.negotiation_seconds - before.negotiation_seconds) / k;
  res->fused_batches_per_step = (after.fused_batches - before.fused_batches) / k;
  res->cache_hits_per_step = (after.cache_hits - before.cache_hits) / k;
  double ok = res->correct ? 1 : 0, all_ok = 0;
  if (kolo_result_t r = kolo_allreduce(comm, &ok, &all_ok, 1, KOLO_FLOAT64, KOLO_MIN)) return r;
  res->correct = all_ok == 1;
  return KOLO_SUCCESS;
}

void print_fusion(const FusionOptions& o, int ranks, const FusionResult& r) {
  std::printf("# kolo_bench fusion: %s, %zu gradient tensors, %zu parameters (float32), %d ranks, %d steps\n",
              o.model.c_str(), r.tensors, r.parameters, ranks, o.steps);
  std::printf("%-44s %12.3f ms\n", "step through the engine (median)", r.step_s * 1e3);
  std::printf("%-44s %12.3f ms\n", "one allreduce of the same size (median)", r.single_s * 1e3);
  std::printf("%-44s %12.3f\n", "step / one allreduce", r.step_s / r.single_s);
  std::printf("%-44s %12.2f\n", "rounds per step", r.rounds_per_step);
  std::printf("%-44s %12.2f\n", "rounds with full requests per step", r.message_rounds_per_step);
  std::printf("%-44s %12.2f\n", "tensors agreed through the cache per step", r.cache_hits_per_step);
  std::printf("%-44s %12.3f ms\n", "negotiation per step (cache warm)", r.negotiation_s_per_step * 1e3);
  std::printf("%-44s %12.2f\n", "fused batches per step", r.fused_batches_per_step);
  std::printf("%-44s %12s\n", "results", r.correct ? "correct" : "WRONG");
}

std::string fusion_json(const FusionOptions& o, int ranks, const FusionResult& r) {
  char buf[1024];
  std::snprintf(buf, sizeof(buf),
                "{\"mode\": \"fusion\", \"model\": \"%s\", \"ranks\": %d, \"tensors\": %zu, \"parameters\": %zu, "
                "\"steps\": %d, \"step_s\": %.9g, \"single_allreduce_s\": %.9g, \"ratio\": %.6g, "
                "\"rounds_per_step\": %.6g, \"message_rounds_per_step\": %.6g, \"cache_hits_per_step\": %.6g, "
                "\"negotiation_s_per_step\": %.9g, \"fused_batches_per_step\": %.6g, \"correct\": %s}\n",
                o.model.c_str(), ranks, r.tensors, r.parameters, o.steps, r.step_s, r.single_s, r.step_s / r.single_s,
                r.rounds_per_step, r.message_rounds_per_step, r.cache_hits_per_step, r.negotiation_s_per_step,
                r.fused_batches_per_step, r.correct ? "true" : "false");
  return buf;
}

}  // namespace kolo::bench
