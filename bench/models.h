// Gradient-tensor profiles of four ImageNet CNNs, for the training-scaling
// emulator: which tensors a data-parallel step has to allreduce, in the order
// backprop hands them over, and how long the step's compute takes.
//
// The tensor lists follow PyTorch torchvision's parameter granularity (one
// tensor per conv weight, BatchNorm weight, BatchNorm bias, linear weight,
// linear bias) and are built from the layer definitions in models.cc, so the
// element counts are derived rather than copied.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kolo::bench {

struct GradientTensor {
  std::string name;  // torchvision parameter name, e.g. "layer4.2.conv3.weight"
  size_t elements;
  // Multiply-adds per image of the work that produces this gradient (a
  // weight's layer: elements x output positions; a bias or BatchNorm
  // parameter: its elements x positions). Backward time is spread over the
  // gradients in proportion to it: VGG's fully connected layers hold most
  // parameters but little compute, and are ready early.
  double macs = 0;
};

struct ModelProfile {
  std::string name;                       // "resnet50", "resnet101", "inception_v3", "vgg16"
  std::vector<GradientTensor> gradients;  // backprop order: last layer's parameters first
  double forward_ms;                      // default forward time per step (P100, batch 64)
  double backward_ms;                     // default backward time per step
  size_t total_parameters() const;
  double total_macs() const;
};

// The names find_model knows, in a fixed order.
std::vector<std::string> model_names();

// The profile of a model by name; nullptr if unknown. Profiles are built once
// and live for the whole program.
const ModelProfile* find_model(const std::string& name);

}  // namespace kolo::bench
