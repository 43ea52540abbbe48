#include "runtime/residual_store.h"

namespace kolo {

float* ResidualStore::get(const std::string& key, size_t count) {
  std::vector<float>& r = residuals_[key];
  if (r.size() != count) {
    bytes_.fetch_sub(r.size() * sizeof(float), std::memory_order_relaxed);
    r.assign(count, 0.0f);
    r.shrink_to_fit();
    bytes_.fetch_add(count * sizeof(float), std::memory_order_relaxed);
  }
  return r.data();
}

}  // namespace kolo
