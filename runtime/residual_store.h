// Error feedback's state (collectives/compressed_ring.h): for each named
// tensor of the engine that asked for it, one float per element holding
// what this rank's encodings of that tensor lost in its last allreduce,
// added into the next one. Kept by the engine's thread; its size is read
// from any thread (kolo_engine_get_residual_bytes).
#pragma once

#include <atomic>
#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

namespace kolo {

class ResidualStore {
 public:
  // The residuals of `key` (a tensor's name, and its index in a group), for
  // `count` elements: zeros the first time, and again whenever the count
  // changed (a tensor of the same name but another shape starts afresh).
  float* get(const std::string& key, size_t count);
  // A float buffer of `count` for one call's fused residuals, reused.
  float* batch(size_t count) {
    if (batch_.size() < count) batch_.resize(count);
    return batch_.data();
  }
  // Bytes held for all tensors.
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }

 private:
  std::unordered_map<std::string, std::vector<float>> residuals_;
  std::vector<float> batch_;
  std::atomic<size_t> bytes_{0};
};

}  // namespace kolo
