// The double binary tree's shape: every rank reached once from each root,
// links agreeing on both ends, log2 depth, and (at even sizes) no rank an
// inner node of both trees.
#include "collectives/tree_schedule.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/tree.h"

namespace kolo {
namespace {

TEST(DoubleTree, EveryTreeSpansTheRanksWithConsistentLinks) {
  for (int n = 1; n <= 130; ++n) {
    for (int t = 0; t < 2; ++t) {
      int roots = 0;
      std::vector<int> reached(n, 0);
      for (int r = 0; r < n; ++r) {
        const TreeLinks l = double_tree_links(n, r, t);
        ASSERT_LE(l.children.size(), 2u) << "n=" << n << " tree " << t << " rank " << r;
        if (l.parent < 0) {
          ++roots;
          EXPECT_EQ(r, double_tree_root(n, t)) << "n=" << n << " tree " << t;
        } else {
          ASSERT_GE(l.parent, 0);
          ASSERT_LT(l.parent, n);
          const auto& siblings = double_tree_links(n, l.parent, t).children;
          EXPECT_NE(std::find(siblings.begin(), siblings.end(), r), siblings.end())
              << "n=" << n << " tree " << t << ": rank " << r << "'s parent " << l.parent << " does not list it";
        }
        for (int c : l.children) {
          ASSERT_TRUE(c >= 0 && c < n && c != r);
          EXPECT_EQ(double_tree_links(n, c, t).parent, r) << "n=" << n << " tree " << t << " child " << c;
          ++reached[c];
        }
      }
      EXPECT_EQ(roots, 1) << "n=" << n << " tree " << t;
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(reached[r], r == double_tree_root(n, t) ? 0 : 1) << "n=" << n << " tree " << t << " rank " << r;
      }
    }
  }
}

TEST(DoubleTree, DepthIsLogarithmic) {
  EXPECT_EQ(double_tree_depth(1), 0);
  EXPECT_EQ(double_tree_depth(2), 1);
  for (int n : {3, 4, 8, 9, 64, 100, 512, 1024}) {
    EXPECT_LE(double_tree_depth(n), static_cast<int>(std::ceil(std::log2(n))) + 1) << n;
  }
}

TEST(DoubleTree, AtEvenSizesNoRankIsAnInnerNodeOfBothTrees) {
  // What balances the links: a leaf of one tree carries the other's sums.
  for (int n = 2; n <= 130; n += 2) {
    for (int r = 0; r < n; ++r) {
      const bool inner0 = !double_tree_links(n, r, 0).children.empty();
      const bool inner1 = !double_tree_links(n, r, 1).children.empty();
      EXPECT_FALSE(inner0 && inner1) << "n=" << n << " rank " << r;
    }
  }
}

TEST(DoubleTree, AHostsLinkCarriesTheEdgesThatLeaveIt) {
  // One rank per host: an inner node of one tree and a leaf of the other.
  EXPECT_EQ(double_tree_host_load(8, 1), 2);
  EXPECT_EQ(double_tree_host_load(64, 1), 2);
  // All on one host: nothing crosses.
  EXPECT_EQ(double_tree_host_load(8, 8), 0);
  // Blocks of 4: a block's subtrees hang from ranks whose links leave it,
  // in both trees; never more than every rank's own two.
  for (int n : {16, 64, 512}) {
    const int load = double_tree_host_load(n, 4);
    EXPECT_GE(load, 2) << n;
    EXPECT_LE(load, 8) << n;
  }
}

TEST(DoubleTree, PeersAreBothTreesLinks) {
  // 8 ranks, tree 0: 0-4, 4-2, 4-6, 2-1, 2-3, 6-5, 6-7; tree 1 mirrors it.
  EXPECT_EQ(double_tree_links(8, 4, 0).parent, 0);
  EXPECT_EQ(double_tree_links(8, 4, 0).children, (std::vector<int>{2, 6}));
  EXPECT_EQ(double_tree_links(8, 3, 1).parent, 7);  // mirror of 4 -> 0
  std::vector<int> p = tree_peers(4, 8);
  std::sort(p.begin(), p.end());
  // Tree 0: parent 0, children 2, 6; tree 1 (7 - r): rank 4 is 3's image, a leaf under 5 (image of 2).
  EXPECT_EQ(p, (std::vector<int>{0, 2, 5, 6}));
}

}  // namespace
}  // namespace kolo
