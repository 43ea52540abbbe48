#include "common/log.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace kolo
