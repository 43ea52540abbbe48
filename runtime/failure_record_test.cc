// The job's first failure survives the store's text, its message whatever
// it holds, and a damaged record is refused rather than misread.
#include "runtime/failure_record.h"

#include <gtest/gtest.h>

namespace kolo {
namespace {

TEST(FailureRecord, SurvivesTheStore) {
  const FailureRecord sent{12, Code::kPeerLost, "rank 12 lost rank 13 | its socket closed"};
  FailureRecord got;
  ASSERT_TRUE(decode_failure(encode_failure(sent), &got).is_ok());
  EXPECT_EQ(got.rank, 12);
  EXPECT_EQ(got.code, Code::kPeerLost);
  EXPECT_EQ(got.message, sent.message);
}

TEST(FailureRecord, DamagedRecordsAreRefused) {
  FailureRecord got;
  for (const char* text : {"", "3", "3|4", "-1|4|x", "x|4|x", "3|0|ok is no failure", "3|99|x", "3||x",
                           "99999999999|4|x", " 3|4|x"}) {
    EXPECT_EQ(decode_failure(text, &got).code(), Code::kInternal) << text;
  }
}

}  // namespace
}  // namespace kolo
