// Fuzzes the connection handshake as the accepting and the connecting side
// see it: a challenge, a hello message and an acknowledgement built from
// arbitrary bytes must be judged, never crash.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transport/handshake.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::Challenge challenge{};
  kolo::HelloMessage message{};
  kolo::HelloAck ack{};
  size_t at = 0;
  auto take = [&](void* dst, size_t n) {
    size_t k = size - at < n ? size - at : n;
    std::memcpy(dst, data + at, k);
    at += k;
  };
  take(&challenge, sizeof(challenge));
  take(&message, sizeof(message));
  take(&ack, sizeof(ack));
  const kolo::HelloExpectation expected{kolo::job_id_from_name("fuzz"), 1, 4, 2, 0};
  (void)kolo::check_challenge(challenge);
  kolo::Status verdict = kolo::check_hello_message(message, challenge, expected, "secret");
  // Without the secret no input may be accepted.
  if (verdict.is_ok()) __builtin_trap();
  (void)kolo::check_hello(message.hello, expected);
  (void)kolo::check_ack(ack, message, challenge, "secret", "fuzzed peer");
  return 0;
}
