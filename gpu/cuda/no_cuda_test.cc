// kernels_test in a build without CUDA: one test that says how to run the
// real ones.
#include <cstdio>

#include <gtest/gtest.h>

// "SKIPPED: reason" is the line tools/test.sh counts as a skip.
TEST(Kernels, NeedCuda) {
  std::printf("SKIPPED: built without CUDA (bazel test --config=cuda)\n");
  GTEST_SKIP() << "built without CUDA (bazel test --config=cuda)";
}
