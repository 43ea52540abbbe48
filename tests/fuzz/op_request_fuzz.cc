// Fuzzes the engine's request codec: negotiation messages come from other
// ranks, so whatever bytes arrive must decode or be refused, never crash;
// and what decodes must encode back to requests that decode alike.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/op_request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::vector<kolo::OpRequest> requests;
  if (!kolo::decode_requests(bytes, &requests).is_ok()) return 0;
  std::vector<kolo::OpRequest> again;
  if (!kolo::decode_requests(kolo::encode_requests(requests), &again).is_ok()) __builtin_trap();
  if (again.size() != requests.size()) __builtin_trap();
  for (size_t i = 0; i < requests.size(); ++i) {
    if (!(again[i] == requests[i])) __builtin_trap();
    for (const auto& shape : requests[i].shapes) (void)kolo::element_count(shape);
  }
  return 0;
}
