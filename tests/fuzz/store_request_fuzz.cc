// Fuzzes the rendezvous store's request parser: any bytes a stranger sends
// must parse or be refused, never crash, over-read or over-allocate.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/store_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string body(reinterpret_cast<const char*>(data), size);
  kolo::StoreRequest request;
  kolo::Status s = kolo::parse_store_request(body, &request);
  if (s.is_ok() && request.op == kolo::StoreOp::kGet) {
    // Whatever parsed must fit in what was sent.
    size_t total = 0;
    for (const auto& k : request.keys) total += k.size() + 4;
    if (total > size) __builtin_trap();
  }
  return 0;
}
