// Fuzzes the failure record codec: the job's first failure, written by one
// rank, is read by every rank that fails after it, so any text must decode
// or be refused, never crash; and what decodes must encode back to itself.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/failure_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  kolo::FailureRecord record;
  if (!kolo::decode_failure(text, &record).is_ok()) return 0;
  kolo::FailureRecord again;
  if (!kolo::decode_failure(kolo::encode_failure(record), &again).is_ok()) __builtin_trap();
  if (again.rank != record.rank || again.code != record.code || again.message != record.message) __builtin_trap();
  return 0;
}
