// kernel_bench in a build without CUDA: says how to build the real one.
#include <cstdio>

int main() {
  std::printf("built without CUDA (bazel build --config=cuda)\n");
  return 0;
}
