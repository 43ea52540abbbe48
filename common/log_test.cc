#include "common/log.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace kolo {
namespace {

TEST(Log, SubsystemFilterKeepsOnlyTheNamedDirectories) {
  set_log_subsystems("");
  EXPECT_TRUE(log_subsystem_enabled("transport/tcp/pair.cc"));
  set_log_subsystems("runtime,transport");
  EXPECT_TRUE(log_subsystem_enabled("runtime/engine.cc"));
  EXPECT_TRUE(log_subsystem_enabled("transport/tcp/pair.cc"));
  EXPECT_FALSE(log_subsystem_enabled("collectives/ring.cc"));
  EXPECT_FALSE(log_subsystem_enabled("run/x.cc"));  // whole names only
  set_log_subsystems("");
}

TEST(Log, LevelsParseByNameOrNumberInAnyCase) {
  LogLevel level = LogLevel::kWarn;
  ASSERT_TRUE(parse_log_level("DEBUG", &level).is_ok());
  EXPECT_EQ(level, LogLevel::kDebug);
  ASSERT_TRUE(parse_log_level("0", &level).is_ok());
  EXPECT_EQ(level, LogLevel::kError);
  ASSERT_TRUE(parse_log_level("Info", &level).is_ok());
  EXPECT_EQ(level, LogLevel::kInfo);
  Status bad = parse_log_level("verbose", &level);
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("verbose"), std::string::npos) << bad.message();
  EXPECT_EQ(level, LogLevel::kInfo);  // unchanged by the bad value
}

TEST(Log, BadLevelInTheEnvironmentIsAnErrorNamingTheVariable) {
  const LogLevel before = log_level();
  setenv("KOLO_LOG_LEVEL", "loud", 1);
  Status s = load_log_settings();
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("KOLO_LOG_LEVEL"), std::string::npos) << s.message();
  EXPECT_EQ(log_level(), before);
  setenv("KOLO_LOG_LEVEL", "debug", 1);
  ASSERT_TRUE(load_log_settings().is_ok());
  EXPECT_EQ(log_level(), LogLevel::kDebug);
  unsetenv("KOLO_LOG_LEVEL");
  set_log_level(before);
}

}  // namespace
}  // namespace kolo
