// gpu_worker in a build without CUDA: nothing to run.
#include <cstdio>

int main() {
  std::printf("SKIP: built without CUDA (bazel test --config=cuda)\n");
  return 0;
}
