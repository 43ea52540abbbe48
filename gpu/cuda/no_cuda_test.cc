// kernels_test in a build without CUDA: one test that says how to run the
// real ones.
#include <gtest/gtest.h>

TEST(Kernels, NeedCuda) { GTEST_SKIP() << "built without CUDA (bazel test --config=cuda)"; }
