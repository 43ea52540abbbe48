// Fusion mode: a training step's gradients through the runtime engine.
//
// Each step submits a model's gradient tensors (ResNet-50: 161 tensors,
// 25.6M parameters) as named allreduces in backprop order, as a framework's
// hooks would, and waits for all of them. The reference is one synchronous
// allreduce of the same total size in the same run: with fusion on, the step
// should cost about the same. The engine's counters give the negotiation
// cost per step once the response cache is warm.
#pragma once

#include <string>

#include "bindings/c/kolo.h"

namespace kolo::bench {

struct FusionOptions {
  std::string model = "resnet50";
  int steps = 10;   // timed
  int warmup = 2;   // untimed; fill the cache
  bool progress = false;
};

struct FusionResult {
  size_t tensors = 0;
  size_t parameters = 0;
  double step_s = 0;        // median step, max over ranks
  double single_s = 0;      // one allreduce of the total size, median, max over ranks
  double rounds_per_step = 0;
  double message_rounds_per_step = 0;
  double negotiation_s_per_step = 0;
  double fused_batches_per_step = 0;
  double cache_hits_per_step = 0;
  bool correct = true;
};

kolo_result_t run_fusion(kolo_comm_t comm, const FusionOptions& o, FusionResult* result);
void print_fusion(const FusionOptions& o, int ranks, const FusionResult& r);
std::string fusion_json(const FusionOptions& o, int ranks, const FusionResult& r);

}  // namespace kolo::bench
