// kernel_bench and gpu_worker in a build without CUDA: say how to build the
// real ones. "SKIP" is what gpu_test.sh looks for.
#include <cstdio>

int main() {
  std::printf("SKIP: built without CUDA (bazel build --config=cuda)\n");
  return 0;
}
