#include "bench/models.h"

#include <gtest/gtest.h>

namespace kolo::bench {
namespace {

// Totals and tensor counts of torchvision's models for 1000 classes (its
// parameters(), one tensor per weight and per bias); Inception v3 without the
// auxiliary classifier.
struct Expected {
  const char* name;
  size_t parameters;
  size_t tensors;
  const char* classifier;  // prefix of the last layer's tensors
};

const Expected kExpected[] = {
    {"resnet50", 25557032, 161, "fc."},
    {"resnet101", 44549160, 314, "fc."},
    {"inception_v3", 23834568, 284, "fc."},
    {"vgg16", 138357544, 32, "classifier.6."},
};

TEST(Models, NamesAreTheFourModels) {
  EXPECT_EQ(model_names(), (std::vector<std::string>{"resnet50", "resnet101", "inception_v3", "vgg16"}));
}

TEST(Models, TotalsAndTensorCountsMatchTorchvision) {
  for (const auto& e : kExpected) {
    SCOPED_TRACE(e.name);
    const ModelProfile* m = find_model(e.name);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->name, e.name);
    EXPECT_EQ(m->total_parameters(), e.parameters);
    EXPECT_EQ(m->gradients.size(), e.tensors);
  }
}

TEST(Models, ClassifierGradientsComeFirst) {
  for (const auto& e : kExpected) {
    SCOPED_TRACE(e.name);
    const ModelProfile* m = find_model(e.name);
    ASSERT_NE(m, nullptr);
    ASSERT_GE(m->gradients.size(), 2u);
    // Backprop order: the classifier's bias, then its weight (1000 x features).
    std::string prefix = e.classifier;
    EXPECT_EQ(m->gradients[0].name, prefix + "bias");
    EXPECT_EQ(m->gradients[0].elements, 1000u);
    EXPECT_EQ(m->gradients[1].name, prefix + "weight");
    EXPECT_EQ(m->gradients[1].elements % 1000, 0u);
  }
}

TEST(Models, FirstConvGradientComesLast) {
  // The input layer's weight is the last gradient backprop produces.
  EXPECT_EQ(find_model("resnet50")->gradients.back().name, "conv1.weight");
  EXPECT_EQ(find_model("resnet50")->gradients.back().elements, 64u * 3 * 7 * 7);
  EXPECT_EQ(find_model("inception_v3")->gradients.back().name, "Conv2d_1a_3x3.conv.weight");
  EXPECT_EQ(find_model("vgg16")->gradients.back().name, "features.0.weight");
}

TEST(Models, EveryTensorHasElements) {
  for (const auto& name : model_names()) {
    SCOPED_TRACE(name);
    for (const auto& g : find_model(name)->gradients) {
      EXPECT_GT(g.elements, 0u) << g.name;
      EXPECT_FALSE(g.name.empty());
    }
  }
}

TEST(Models, StepTimesArePositiveWithBackwardAboutTwiceForward) {
  for (const auto& name : model_names()) {
    SCOPED_TRACE(name);
    const ModelProfile* m = find_model(name);
    EXPECT_GT(m->forward_ms, 0.0);
    EXPECT_NEAR(m->backward_ms, 2.0 * m->forward_ms, 1e-9);
  }
}

TEST(Models, UnknownNameIsNull) {
  EXPECT_EQ(find_model("resnet18"), nullptr);
  EXPECT_EQ(find_model(""), nullptr);
}

TEST(Models, ComputeFollowsTheLayersNotTheParameters) {
  // Multiply-adds per image, against the published figures (about 4.1,
  // 7.8, 5.7 and 15.5 G); the per-stage grids are approximate, so within 15%.
  const std::pair<const char*, double> published[] = {
      {"resnet50", 4.1e9}, {"resnet101", 7.8e9}, {"inception_v3", 5.7e9}, {"vgg16", 15.5e9}};
  for (const auto& [name, macs] : published) {
    const ModelProfile* m = find_model(name);
    ASSERT_NE(m, nullptr);
    EXPECT_NEAR(m->total_macs(), macs, 0.15 * macs) << name;
  }
  // VGG-16: the classifier holds most parameters but almost none of the
  // compute, so its gradients are ready early in the backward pass.
  const ModelProfile* vgg = find_model("vgg16");
  double fc_params = 0, fc_macs = 0;
  for (const auto& g : vgg->gradients) {
    if (g.name.rfind("classifier", 0) == 0) {
      fc_params += static_cast<double>(g.elements);
      fc_macs += g.macs;
    }
  }
  EXPECT_GT(fc_params / static_cast<double>(vgg->total_parameters()), 0.85);
  EXPECT_LT(fc_macs / vgg->total_macs(), 0.02);
}

}  // namespace
}  // namespace kolo::bench
