// Ranks as messages name them: "0, 2, 5", the first `most` of them and then
// ", ..." (a long job's error need not list every rank).
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace kolo {

inline std::string rank_list(const std::vector<int>& ranks, size_t most = std::numeric_limits<size_t>::max()) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < most; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > most) s += ", ...";
  return s;
}

}  // namespace kolo
