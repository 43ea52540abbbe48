// Scaling mode: emulated data-parallel training steps.
//
// A step is a forward pass, then a backward pass during which gradients
// become ready in backprop order; gradients are packed, in that order, into
// buckets of about --bucket-mb (small tensors fused into larger messages),
// and each bucket is allreduced as soon as its last gradient is ready,
// overlapping the rest of the backward pass. Compute is emulated by
// sleeping: it stands for GPU time and takes no host CPU from the
// communication. The backward pass's time is spread over the gradients in
// proportion to their layers' multiply-adds. T(1) is the same step with no
// communication; efficiency = T(1)/T(N).
#pragma once

#include <string>
#include <vector>

#include "bench/model.h"
#include "bench/models.h"
#include "bindings/c/kolo.h"

namespace kolo::bench {

struct ScalingOptions {
  std::vector<std::string> models;  // e.g. {"resnet50"}; see bench/models.h
  int steps = 5;                    // timed steps (after one warm-up step)
  double bucket_mb = 25;            // fusion bucket size
  double compute_scale = 1;         // multiplies the model's compute time
  double compute_ms = 0;            // if > 0, the step's compute time instead (1/3 forward, 2/3 backward)
  int predict_ranks = 0;            // also predict efficiency at this many ranks
  bool progress = false;
};

struct ScalingResult {
  std::string model;
  size_t parameters = 0;
  size_t gradients = 0;
  size_t buckets = 0;
  double forward_s = 0, backward_s = 0;
  double t1_s = 0;  // step time of one rank, no communication
  double tn_s = 0;  // step time with N ranks (max over ranks of medians)
  double efficiency = 0;
  // The prediction for predict_ranks, from the ring model fitted in the run.
  int predicted_ranks = 0;
  double predicted_tn_s = 0;
  double predicted_efficiency = 0;
  RingModel fitted;
};

// A fusion bucket of gradients: its elements, and when its last gradient
// is ready (seconds after the backward pass begins).
struct Bucket {
  size_t elements = 0;
  double ready_s = 0;
};
// The model's gradients packed in backprop order into buckets of at least
// bucket_bytes (the last takes what is left), for a backward pass of
// backward_s spread over the layers by their multiply-adds.
std::vector<Bucket> make_buckets(const ModelProfile& m, double backward_s, double bucket_bytes);

kolo_result_t run_scaling(kolo_comm_t comm, const ScalingOptions& o, std::vector<ScalingResult>* results);

}  // namespace kolo::bench
