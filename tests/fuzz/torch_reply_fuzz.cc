// Fuzzes the parser of c10d TCPStore replies (torchrun's agent store): any
// bytes the store, or whoever answers on its port, sends must parse or be
// refused, never crash, over-read or over-allocate.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/torch_store_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const kolo::TorchReplyKind kinds[] = {kolo::TorchReplyKind::kValue, kolo::TorchReplyKind::kInt64,
                                        kolo::TorchReplyKind::kCheck, kolo::TorchReplyKind::kWait};
  kolo::TorchReplyKind kind = kinds[data[0] % 4];
  std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  // Fed as the client feeds it: growing prefixes, as far as it asks.
  size_t have = 0;
  for (;;) {
    kolo::TorchReply reply;
    bool complete = false;
    size_t needed = 0;
    kolo::Status s = kolo::parse_torch_reply(kind, body.data(), have, 1 << 16, &complete, &needed, &reply);
    if (!s.is_ok()) break;
    if (complete) {
      if (reply.consumed > have || reply.value.size() > (1 << 16)) __builtin_trap();
      break;
    }
    if (needed <= have || needed > have + body.size() + (1 << 16) + 8) __builtin_trap();
    if (needed > body.size()) break;
    have = needed;
  }
  return 0;
}
