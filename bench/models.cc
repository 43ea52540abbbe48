#include "bench/models.h"

#include <algorithm>

namespace kolo::bench {
namespace {

constexpr size_t kClasses = 1000;  // ImageNet

// Default step times. A step is forward + backward over one batch of 64
// images on one NVIDIA Tesla P100, the GPU of Horovod's published scaling
// benchmark (tf_cnn_benchmarks, batch 64 per GPU). Throughputs are the
// single-GPU "training synthetic data" row of TensorFlow's benchmark page
// (tensorflow/docs_src/performance/benchmarks.md, "Details for NVIDIA DGX-1
// (NVIDIA Tesla P100)", May 2017, batch 64, sgd): InceptionV3 142 img/s,
// ResNet-50 219, ResNet-152 91.8, VGG16 154. ResNet-101 is not on that page:
// 130 img/s is the midpoint of ResNet-50 and ResNet-152 in time per image
// (4.57 ms and 10.9 ms -> 7.7 ms), which is also where its FLOPs sit
// (4.1 / 7.8 / 11.5 GFLOPs); it is an estimate, not a measurement.
constexpr double kBatch = 64;
constexpr double kResNet50ImagesPerSec = 219;
constexpr double kResNet101ImagesPerSec = 130;
constexpr double kInceptionV3ImagesPerSec = 142;
constexpr double kVgg16ImagesPerSec = 154;

// Collects parameter tensors in forward order, which is the order torchvision
// registers them in; finish() reverses it into backprop order.
class Layers {
 public:
  // Convolution without bias: it is followed by BatchNorm, whose bias makes a
  // conv bias redundant, so torchvision leaves it out.
  void conv(const std::string& name, size_t in, size_t out, size_t kh, size_t kw) {
    add(name + ".weight", out * in * kh * kw);
  }
  // The output grid (height = width) of the layers added next, for their
  // multiply-adds. Classifier layers work on one position.
  void grid(size_t side) { positions_ = side * side; }
  // Convolution with bias (VGG has no BatchNorm).
  void conv_with_bias(const std::string& name, size_t in, size_t out, size_t kh, size_t kw) {
    conv(name, in, out, kh, kw);
    add(name + ".bias", out);
  }
  // BatchNorm's affine weight and bias; running statistics are buffers, not
  // parameters, and are never allreduced.
  void batch_norm(const std::string& name, size_t channels) {
    add(name + ".weight", channels);
    add(name + ".bias", channels);
  }
  void linear(const std::string& name, size_t in, size_t out) {
    positions_ = 1;
    add(name + ".weight", out * in);
    add(name + ".bias", out);
  }

  ModelProfile finish(const std::string& model, double images_per_sec) {
    ModelProfile p;
    p.name = model;
    // Backprop reaches the last layer first, so its gradients are ready first.
    p.gradients.assign(forward_.rbegin(), forward_.rend());
    // Backward costs about twice forward: it computes gradients with respect
    // to both the inputs and the weights.
    double step_ms = kBatch / images_per_sec * 1000.0;
    p.forward_ms = step_ms / 3.0;
    p.backward_ms = step_ms - p.forward_ms;
    return p;
  }

 private:
  void add(std::string name, size_t elements) {
    forward_.push_back({std::move(name), elements, static_cast<double>(elements) * static_cast<double>(positions_)});
  }
  std::vector<GradientTensor> forward_;
  size_t positions_ = 1;
};

// ResNet with bottleneck blocks (torchvision's ResNet-50/101/152). Stage s has
// width 64 * 2^s and outputs 4x that; the first block of each stage changes
// the channel count, so it carries a 1x1 projection shortcut ("downsample").
ModelProfile resnet(const std::string& model, const std::vector<int>& blocks_per_stage,
                    double images_per_sec) {
  constexpr size_t kExpansion = 4;
  Layers l;
  l.grid(112);
  l.conv("conv1", 3, 64, 7, 7);
  l.batch_norm("bn1", 64);
  size_t in = 64;
  for (size_t s = 0; s < blocks_per_stage.size(); ++s) {
    l.grid(size_t{56} >> s);  // each stage halves the grid (approximately: the first block's 1x1 runs before the stride)
    size_t width = size_t{64} << s;
    size_t out = width * kExpansion;
    for (int b = 0; b < blocks_per_stage[s]; ++b) {
      std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(b);
      l.conv(p + ".conv1", in, width, 1, 1);
      l.batch_norm(p + ".bn1", width);
      l.conv(p + ".conv2", width, width, 3, 3);
      l.batch_norm(p + ".bn2", width);
      l.conv(p + ".conv3", width, out, 1, 1);
      l.batch_norm(p + ".bn3", out);
      if (b == 0) {
        l.conv(p + ".downsample.0", in, out, 1, 1);
        l.batch_norm(p + ".downsample.1", out);
      }
      in = out;
    }
  }
  l.linear("fc", in, kClasses);
  return l.finish(model, images_per_sec);
}

// VGG-16 (configuration "D"): 3x3 convs with bias, max-pool between stages,
// then three fully connected layers on the 512 x 7 x 7 pooled features.
// Tensor names use torchvision's nn.Sequential indices, where each conv is
// followed by a ReLU and each stage by a MaxPool, so they count as modules.
ModelProfile vgg16() {
  const std::vector<std::vector<size_t>> stages = {
      {64, 64}, {128, 128}, {256, 256, 256}, {512, 512, 512}, {512, 512, 512}};
  Layers l;
  size_t in = 3;
  int index = 0;
  size_t side = 224;
  for (const auto& stage : stages) {
    l.grid(side);
    side /= 2;
    for (size_t out : stage) {
      l.conv_with_bias("features." + std::to_string(index), in, out, 3, 3);
      index += 2;  // conv, ReLU
      in = out;
    }
    index += 1;  // MaxPool
  }
  // classifier: Linear, ReLU, Dropout, Linear, ReLU, Dropout, Linear.
  l.linear("classifier.0", in * 7 * 7, 4096);
  l.linear("classifier.3", 4096, 4096);
  l.linear("classifier.6", 4096, kClasses);
  return l.finish("vgg16", kVgg16ImagesPerSec);
}

// Inception v3 as in torchvision, without the auxiliary classifier (it only
// exists at training time in some setups and is not part of the ~23.8M model).
// Every conv is a BasicConv2d: conv without bias, then BatchNorm.
class InceptionV3 {
 public:
  ModelProfile build() {
    l_.grid(149);
    basic("Conv2d_1a_3x3", 3, 32, 3, 3);
    l_.grid(147);
    basic("Conv2d_2a_3x3", 32, 32, 3, 3);
    basic("Conv2d_2b_3x3", 32, 64, 3, 3);
    l_.grid(73);
    basic("Conv2d_3b_1x1", 64, 80, 1, 1);
    l_.grid(71);
    basic("Conv2d_4a_3x3", 80, 192, 3, 3);
    size_t c = 192;
    // 35x35 grid; pool_features grows after the first block.
    l_.grid(35);
    c = block_a("Mixed_5b", c, 32);
    c = block_a("Mixed_5c", c, 64);
    c = block_a("Mixed_5d", c, 64);
    l_.grid(17);
    c = block_b("Mixed_6a", c);  // reduce to 17x17
    // 17x17 grid; the factorized 7x7 branches widen from 128 to 192 channels.
    c = block_c("Mixed_6b", c, 128);
    c = block_c("Mixed_6c", c, 160);
    c = block_c("Mixed_6d", c, 160);
    c = block_c("Mixed_6e", c, 192);
    // (torchvision's AuxLogits sits here; excluded.)
    l_.grid(8);
    c = block_d("Mixed_7a", c);  // reduce to 8x8
    c = block_e("Mixed_7b", c);
    c = block_e("Mixed_7c", c);
    l_.linear("fc", c, kClasses);
    return l_.finish("inception_v3", kInceptionV3ImagesPerSec);
  }

 private:
  void basic(const std::string& name, size_t in, size_t out, size_t kh, size_t kw) {
    l_.conv(name + ".conv", in, out, kh, kw);
    l_.batch_norm(name + ".bn", out);
  }

  // Each block returns its output channels: the concatenation of its branches
  // (a max-pool branch passes its input channels through).
  size_t block_a(const std::string& p, size_t in, size_t pool_features) {
    basic(p + ".branch1x1", in, 64, 1, 1);
    basic(p + ".branch5x5_1", in, 48, 1, 1);
    basic(p + ".branch5x5_2", 48, 64, 5, 5);
    basic(p + ".branch3x3dbl_1", in, 64, 1, 1);
    basic(p + ".branch3x3dbl_2", 64, 96, 3, 3);
    basic(p + ".branch3x3dbl_3", 96, 96, 3, 3);
    basic(p + ".branch_pool", in, pool_features, 1, 1);
    return 64 + 64 + 96 + pool_features;
  }

  size_t block_b(const std::string& p, size_t in) {
    basic(p + ".branch3x3", in, 384, 3, 3);
    basic(p + ".branch3x3dbl_1", in, 64, 1, 1);
    basic(p + ".branch3x3dbl_2", 64, 96, 3, 3);
    basic(p + ".branch3x3dbl_3", 96, 96, 3, 3);
    return 384 + 96 + in;  // + max-pool
  }

  // 7x7 convolutions factorized into 1x7 and 7x1 pairs, c7 channels wide.
  size_t block_c(const std::string& p, size_t in, size_t c7) {
    basic(p + ".branch1x1", in, 192, 1, 1);
    basic(p + ".branch7x7_1", in, c7, 1, 1);
    basic(p + ".branch7x7_2", c7, c7, 1, 7);
    basic(p + ".branch7x7_3", c7, 192, 7, 1);
    basic(p + ".branch7x7dbl_1", in, c7, 1, 1);
    basic(p + ".branch7x7dbl_2", c7, c7, 7, 1);
    basic(p + ".branch7x7dbl_3", c7, c7, 1, 7);
    basic(p + ".branch7x7dbl_4", c7, c7, 7, 1);
    basic(p + ".branch7x7dbl_5", c7, 192, 1, 7);
    basic(p + ".branch_pool", in, 192, 1, 1);
    return 192 * 4;
  }

  size_t block_d(const std::string& p, size_t in) {
    basic(p + ".branch3x3_1", in, 192, 1, 1);
    basic(p + ".branch3x3_2", 192, 320, 3, 3);
    basic(p + ".branch7x7x3_1", in, 192, 1, 1);
    basic(p + ".branch7x7x3_2", 192, 192, 1, 7);
    basic(p + ".branch7x7x3_3", 192, 192, 7, 1);
    basic(p + ".branch7x7x3_4", 192, 192, 3, 3);
    return 320 + 192 + in;  // + max-pool
  }

  // 3x3 convolutions split into parallel 1x3 and 3x1 halves whose outputs are
  // concatenated, widening the 8x8 grid.
  size_t block_e(const std::string& p, size_t in) {
    basic(p + ".branch1x1", in, 320, 1, 1);
    basic(p + ".branch3x3_1", in, 384, 1, 1);
    basic(p + ".branch3x3_2a", 384, 384, 1, 3);
    basic(p + ".branch3x3_2b", 384, 384, 3, 1);
    basic(p + ".branch3x3dbl_1", in, 448, 1, 1);
    basic(p + ".branch3x3dbl_2", 448, 384, 3, 3);
    basic(p + ".branch3x3dbl_3a", 384, 384, 1, 3);
    basic(p + ".branch3x3dbl_3b", 384, 384, 3, 1);
    basic(p + ".branch_pool", in, 192, 1, 1);
    return 320 + 384 * 2 + 384 * 2 + 192;
  }

  Layers l_;
};

const std::vector<ModelProfile>& all_models() {
  // Built on first use; a function-local static is initialized thread-safely.
  static const std::vector<ModelProfile> models = {
      resnet("resnet50", {3, 4, 6, 3}, kResNet50ImagesPerSec),
      resnet("resnet101", {3, 4, 23, 3}, kResNet101ImagesPerSec),
      InceptionV3().build(),
      vgg16(),
  };
  return models;
}

}  // namespace

size_t ModelProfile::total_parameters() const {
  size_t total = 0;
  for (const auto& g : gradients) total += g.elements;
  return total;
}

double ModelProfile::total_macs() const {
  double total = 0;
  for (const auto& g : gradients) total += g.macs;
  return total;
}

std::vector<std::string> model_names() {
  std::vector<std::string> names;
  for (const auto& m : all_models()) names.push_back(m.name);
  return names;
}

const ModelProfile* find_model(const std::string& name) {
  const auto& models = all_models();
  auto it = std::find_if(models.begin(), models.end(),
                         [&](const ModelProfile& m) { return m.name == name; });
  return it == models.end() ? nullptr : &*it;
}

}  // namespace kolo::bench
