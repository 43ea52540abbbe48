// Fuzzes the rank facts codec: what a rank publishes at the rendezvous is
// read by every other rank, so any text must decode or be refused, never
// crash; and what decodes must encode back to the same facts.
#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/rank_facts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  kolo::RankFacts facts;
  if (!kolo::decode_rank_facts(text, &facts).is_ok()) return 0;
  kolo::RankFacts again;
  if (!kolo::decode_rank_facts(kolo::encode_rank_facts(facts), &again).is_ok()) __builtin_trap();
  if (again.host != facts.host || again.offers != facts.offers) __builtin_trap();
  return 0;
}
