#include "runtime/fusion_plan.h"

#include <gtest/gtest.h>

#include "collectives/dtype.h"

namespace kolo {
namespace {

OpResponse allreduce(const std::string& name, int64_t elements, DataType dtype = DataType::kFloat32,
                     ReduceOp op = ReduceOp::kSum) {
  OpResponse r;
  r.spec.name = name;
  r.spec.kind = OpKind::kAllreduce;
  r.spec.dtype = static_cast<int32_t>(dtype);
  r.spec.op = static_cast<int32_t>(op);
  r.spec.shapes = {{elements}};
  return r;
}

TEST(FusionPlan, AllreducesOfOneDtypeAndOpFuseUpToTheThreshold) {
  // 4 KiB each in float32; a 10 KiB threshold takes two, then a new group.
  std::vector<OpResponse> ready = {allreduce("a", 1024), allreduce("b", 1024), allreduce("c", 1024)};
  auto groups = plan_fusion(ready, 10 << 10);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<size_t>{0, 1}));
  EXPECT_EQ(groups[1], (std::vector<size_t>{2}));
}

TEST(FusionPlan, OtherDtypesOpsKindsAndFailuresStayApart) {
  std::vector<OpResponse> ready = {allreduce("a", 8), allreduce("b", 8, DataType::kFloat64),
                                   allreduce("c", 8, DataType::kFloat32, ReduceOp::kMax), allreduce("d", 8),
                                   allreduce("e", 8)};
  ready[3].spec.kind = OpKind::kBroadcast;
  ready[4].error = invalid_argument("mismatch");
  auto groups = plan_fusion(ready, 1 << 20);
  ASSERT_EQ(groups.size(), 5u);
  for (size_t i = 0; i < groups.size(); ++i) EXPECT_EQ(groups[i], (std::vector<size_t>{i}));
}

TEST(FusionPlan, ALaterSmallTensorFillsTheRoomALargeOneLeft) {
  std::vector<OpResponse> ready = {allreduce("a", 1024), allreduce("big", 4096), allreduce("c", 512)};
  auto groups = plan_fusion(ready, 8 << 10);  // a (4 KiB) + big (16 KiB) does not fit; c (2 KiB) does
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<size_t>{0, 2}));
  EXPECT_EQ(groups[1], (std::vector<size_t>{1}));
}

TEST(FusionPlan, PiecesUnderTheCopyLimitArePacked) {
  OpRequest grouped;
  grouped.dtype = static_cast<int32_t>(DataType::kFloat32);
  grouped.shapes = {{16}, {kPackBelowBytes / 4}, {0}};
  auto pieces = plan_pieces({&grouped});
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_TRUE(pieces[0].packed);
  EXPECT_FALSE(pieces[1].packed);  // exactly the limit: reduced where it is
  EXPECT_TRUE(pieces[2].packed);
  EXPECT_EQ(pieces[1].count, kPackBelowBytes / 4);
  EXPECT_EQ(pieces[2].tensor, 2u);
}

}  // namespace
}  // namespace kolo
