// Ranks as messages name them. Every message that lists ranks uses these.
#pragma once

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace kolo {

// "0, 2, 5": the first `most` of them and then ", ..." (a long job's error
// need not list every rank).
inline std::string rank_list(const std::vector<int>& ranks, size_t most = std::numeric_limits<size_t>::max()) {
  std::string s;
  for (size_t i = 0; i < ranks.size() && i < most; ++i) s += (i ? ", " : "") + std::to_string(ranks[i]);
  if (ranks.size() > most) s += ", ...";
  return s;
}

// "rank 3" or "ranks 0, 2, 5" (rank_list's `most`).
inline std::string ranks_named(const std::vector<int>& ranks, size_t most = std::numeric_limits<size_t>::max()) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks, most);
}

// "1, 3-5, 7": runs of ascending ranks as ranges (a summary of many peers).
inline std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ", ") + std::to_string(ranks[i]) + (j > i ? "-" + std::to_string(ranks[j]) : "");
    i = j + 1;
  }
  return out;
}

}  // namespace kolo
