// Each argument check: what it accepts, and that what it refuses is named.
#include "runtime/argument_checks.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/dtype.h"

namespace kolo {
namespace {

// The message of a refusal (and that it is invalid_argument).
std::string refusal(const Status& s) {
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
  return s.message();
}

bool says(const Status& s, const std::string& words) { return refusal(s).find(words) != std::string::npos; }

TEST(ArgumentChecks, DtypeOpAndBuffers) {
  EXPECT_TRUE(check_dtype(DataType::kFloat32).is_ok());
  EXPECT_TRUE(says(check_dtype(static_cast<DataType>(-1)), "unknown dtype -1"));
  EXPECT_TRUE(says(check_dtype(static_cast<DataType>(kNumDataTypes)), "unknown dtype"));
  EXPECT_TRUE(check_op(ReduceOp::kSum).is_ok());
  EXPECT_TRUE(says(check_op(static_cast<ReduceOp>(kNumReduceOps)), "unknown reduction op"));
  int x = 0;
  EXPECT_TRUE(check_buffer(nullptr, 0, "sendbuf").is_ok());  // nothing to move
  EXPECT_TRUE(check_buffer(&x, 1, "sendbuf").is_ok());
  EXPECT_TRUE(says(check_buffer(nullptr, 1, "recvbuf"), "recvbuf is NULL with count > 0"));
  EXPECT_TRUE(says(check_reduction(DataType::kFloat32, ReduceOp::kSum, &x, nullptr, 1), "recvbuf"));
  EXPECT_TRUE(says(check_root(3, 3), "root 3 is not a rank of a world of 3"));
  EXPECT_TRUE(says(check_root(-1, 3), "root -1"));
  EXPECT_TRUE(check_root(2, 3).is_ok());
}

TEST(ArgumentChecks, CountsAndBlocks) {
  EXPECT_TRUE(says(check_counts({1, 2}, 3, "recvcounts"), "recvcounts needs one count per rank (3), not 2"));
  EXPECT_TRUE(check_counts({1, 2, 3}, 3, "recvcounts").is_ok());
  EXPECT_EQ(packed_or({}, {2, 0, 3}), (std::vector<size_t>{0, 2, 2}));
  EXPECT_EQ(packed_or({5, 0, 9}, {2, 0, 3}), (std::vector<size_t>{5, 0, 9}));
  EXPECT_EQ(total_of({2, 0, 3}), 5u);
  size_t extent = 0;
  // Blocks in any order, gaps allowed; empty blocks may sit anywhere.
  ASSERT_TRUE(check_blocks({2, 0, 3}, {7, 1, 0}, 3, "displs", &extent).is_ok());
  EXPECT_EQ(extent, 9u);
  EXPECT_TRUE(says(check_blocks({2, 2, 3}, {0, 1, 4}, 3, "displs", &extent), "two ranks' blocks on the same elements"));
  EXPECT_TRUE(says(check_blocks({2, 2}, {0}, 2, "displs", &extent), "needs one displacement per rank (2), not 1"));
}

TEST(ArgumentChecks, RootedBlocks) {
  float own[2] = {0, 0};
  float all[6] = {0};
  const std::vector<size_t> counts = {2, 2, 2};
  const std::vector<size_t> packed;
  std::vector<size_t> displs;
  size_t extent = 0;
  // Rank 1 as root of a gatherv: its own block may be its block of the whole.
  RootedBlocks gather{DataType::kFloat32, 1, 1, 3, counts, "recvcounts", packed, all + 2, 2, "sendbuf", "sendcount", all, "recvbuf"};
  ASSERT_TRUE(check_rooted_blocks(gather, &displs, &extent).is_ok());
  EXPECT_EQ(displs, (std::vector<size_t>{0, 2, 4}));
  EXPECT_EQ(extent, 6u);
  RootedBlocks overlapping = gather;
  overlapping.own = all + 1;  // inside the root's buffer, but not its block
  EXPECT_TRUE(says(check_rooted_blocks(overlapping, &displs, &extent), "sendbuf overlaps recvbuf"));
  RootedBlocks wrong_count = gather;
  wrong_count.own = own;
  wrong_count.own_count = 1;
  EXPECT_TRUE(says(check_rooted_blocks(wrong_count, &displs, &extent), "sendcount 1 differs from recvcounts[1] = 2"));
  RootedBlocks not_root = gather;
  not_root.root = 0;
  not_root.blocks = nullptr;  // only the root's buffer is checked
  not_root.own = own;
  EXPECT_TRUE(check_rooted_blocks(not_root, &displs, &extent).is_ok());
}

}  // namespace
}  // namespace kolo
