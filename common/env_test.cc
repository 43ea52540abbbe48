#include "common/env.h"

#include <cstdlib>

#include <gtest/gtest.h>

namespace kolo {
namespace {

TEST(ParseBytes, AcceptsBinarySuffixes) {
  int64_t v = 0;
  ASSERT_TRUE(parse_bytes("4096", &v).is_ok());
  EXPECT_EQ(v, 4096);
  ASSERT_TRUE(parse_bytes("256K", &v).is_ok());
  EXPECT_EQ(v, 256 * 1024);
  ASSERT_TRUE(parse_bytes("64M", &v).is_ok());
  EXPECT_EQ(v, 64LL << 20);
  ASSERT_TRUE(parse_bytes("1G", &v).is_ok());
  EXPECT_EQ(v, 1LL << 30);
}

TEST(ParseBytes, RejectsGarbage) {
  int64_t v = 0;
  EXPECT_FALSE(parse_bytes("", &v).is_ok());
  EXPECT_FALSE(parse_bytes("abc", &v).is_ok());
  EXPECT_FALSE(parse_bytes("12X", &v).is_ok());
  EXPECT_FALSE(parse_bytes("-5", &v).is_ok());
  EXPECT_FALSE(parse_bytes("99999999999999G", &v).is_ok());
}

TEST(EnvInt64, DefaultWhenUnsetAndErrorNamesVariable) {
  unsetenv("KOLO_TEST_INT");
  int64_t v = 0;
  ASSERT_TRUE(env_int64("KOLO_TEST_INT", 7, 0, 10, &v).is_ok());
  EXPECT_EQ(v, 7);
  setenv("KOLO_TEST_INT", "11", 1);
  Status s = env_int64("KOLO_TEST_INT", 7, 0, 10, &v);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("KOLO_TEST_INT"), std::string::npos);
  setenv("KOLO_TEST_INT", "nope", 1);
  EXPECT_FALSE(env_int64("KOLO_TEST_INT", 7, 0, 10, &v).is_ok());
  unsetenv("KOLO_TEST_INT");
}

TEST(EnvInt64, ASignOnlyWhereTheRangeGoesBelowZero) {
  int64_t v = 0;
  setenv("KOLO_TEST_INT", "-1", 1);
  ASSERT_TRUE(env_int64("KOLO_TEST_INT", 7, -1, 10, &v).is_ok());  // -1: automatic, as KOLO_SPIN_US
  EXPECT_EQ(v, -1);
  setenv("KOLO_TEST_INT", "-2", 1);
  Status s = env_int64("KOLO_TEST_INT", 7, -1, 10, &v);
  EXPECT_NE(s.message().find("out of range [-1, 10]"), std::string::npos) << s.to_string();
  setenv("KOLO_TEST_INT", "-1", 1);
  s = env_int64("KOLO_TEST_INT", 7, 0, 10, &v);
  EXPECT_NE(s.message().find("is not a non-negative integer"), std::string::npos) << s.to_string();
  setenv("KOLO_TEST_INT", "--1", 1);
  EXPECT_FALSE(env_int64("KOLO_TEST_INT", 7, -1, 10, &v).is_ok());
  unsetenv("KOLO_TEST_INT");
}

TEST(EnvDouble, ParsesAndValidates) {
  setenv("KOLO_TEST_D", "2.5", 1);
  double d = 0;
  ASSERT_TRUE(env_double("KOLO_TEST_D", 1.0, 0.0, 10.0, &d).is_ok());
  EXPECT_DOUBLE_EQ(d, 2.5);
  setenv("KOLO_TEST_D", "2.5x", 1);
  EXPECT_FALSE(env_double("KOLO_TEST_D", 1.0, 0.0, 10.0, &d).is_ok());
  unsetenv("KOLO_TEST_D");
}

TEST(EnvBool, ParsesCommonSpellings) {
  bool b = false;
  setenv("KOLO_TEST_B", "1", 1);
  ASSERT_TRUE(env_bool("KOLO_TEST_B", false, &b).is_ok());
  EXPECT_TRUE(b);
  setenv("KOLO_TEST_B", "off", 1);
  ASSERT_TRUE(env_bool("KOLO_TEST_B", true, &b).is_ok());
  EXPECT_FALSE(b);
  setenv("KOLO_TEST_B", "maybe", 1);
  EXPECT_FALSE(env_bool("KOLO_TEST_B", true, &b).is_ok());
  unsetenv("KOLO_TEST_B");
}

}  // namespace
}  // namespace kolo
