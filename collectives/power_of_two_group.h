// The group the recursive schedules (recursive_doubling.h,
// halving_doubling.h) run among: the largest power of two p of the N
// ranks. The first 2(N - p) ranks pair up, and each even one of them folds
// into the odd one above it: it hands over its buffer first and gets the
// result back at the end.
#pragma once

namespace kolo {

struct PowerOfTwoGroup {
  explicit PowerOfTwoGroup(int ranks) : size(1), extra(0) {
    while (size * 2 <= ranks) size *= 2;
    extra = ranks - size;
  }
  // Whether `rank` is in a folding pair, and its partner there.
  bool folds(int rank) const { return rank < 2 * extra; }
  int fold_partner(int rank) const { return rank % 2 == 0 ? rank + 1 : rank - 1; }
  // `rank`'s place in the group, or -1 for a rank folded out.
  int group_rank(int rank) const {
    if (folds(rank)) return rank % 2 == 0 ? -1 : rank / 2;
    return rank - extra;
  }
  int rank_of(int group_rank) const { return group_rank < extra ? group_rank * 2 + 1 : group_rank + extra; }

  int size;   // p
  int extra;  // N - p
};

}  // namespace kolo
