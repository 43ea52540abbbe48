#include "runtime/config.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/algorithms.h"

namespace kolo {
namespace {

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : {"KOLO_BIND_ADDR", "KOLO_IFNAME", "KOLO_TIMEOUT_S", "KOLO_CHECKSUM", "KOLO_SEGMENT_BYTES"}) {
      unsetenv(v);
    }
  }
  void TearDown() override { SetUp(); }
};

TEST_F(ConfigTest, DefaultsAndOverrides) {
  Config c;
  ASSERT_TRUE(load_config(&c).is_ok());
  EXPECT_EQ(c.bind_address, "");
  EXPECT_FALSE(c.checksum);
  setenv("KOLO_TIMEOUT_S", "2.5", 1);
  setenv("KOLO_CHECKSUM", "1", 1);
  setenv("KOLO_SEGMENT_BYTES", "1M", 1);
  ASSERT_TRUE(load_config(&c).is_ok());
  EXPECT_DOUBLE_EQ(c.timeout_s, 2.5);
  EXPECT_TRUE(c.checksum);
  EXPECT_EQ(c.segment_bytes, 1 << 20);
  setenv("KOLO_SEGMENT_BYTES", "0", 1);  // automatic
  ASSERT_TRUE(load_config(&c).is_ok());
  EXPECT_EQ(c.segment_bytes, 0);
  setenv("KOLO_SEGMENT_BYTES", "63", 1);
  const Status s = load_config(&c);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("KOLO_SEGMENT_BYTES = 63: must be 0 (automatic) or at least 64"), std::string::npos)
      << s.message();
}

TEST_F(ConfigTest, InterfaceNameGivesItsAddress) {
  setenv("KOLO_IFNAME", "lo", 1);
  Config c;
  ASSERT_TRUE(load_config(&c).is_ok());
  EXPECT_EQ(c.bind_address, "127.0.0.1");
  setenv("KOLO_BIND_ADDR", "127.0.0.2", 1);  // the explicit address wins
  ASSERT_TRUE(load_config(&c).is_ok());
  EXPECT_EQ(c.bind_address, "127.0.0.2");
}

TEST_F(ConfigTest, ErrorsNameTheVariable) {
  Config c;
  setenv("KOLO_IFNAME", "nosuchif9", 1);
  Status s = load_config(&c);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("nosuchif9"), std::string::npos);
  unsetenv("KOLO_IFNAME");
  setenv("KOLO_TIMEOUT_S", "soon", 1);
  s = load_config(&c);
  EXPECT_NE(s.message().find("KOLO_TIMEOUT_S"), std::string::npos);
}

// KOLO_ALGORITHM takes what the algorithm tables name, and nothing else: a
// new table entry is a new value without a list to keep by hand.
TEST_F(ConfigTest, AlgorithmsAreTheTablesNames) {
  const std::vector<std::string> names = algorithm_names();
  for (const char* expected : {"ring", "recursive_doubling", "halving_doubling", "shared_memory", "tree", "hierarchical"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  EXPECT_TRUE(check_algorithm("KOLO_ALGORITHM", "auto").is_ok());
  for (const std::string& name : names) EXPECT_TRUE(check_algorithm("KOLO_ALGORITHM", name).is_ok()) << name;
  Status s = check_algorithm("KOLO_ALGORITHM", "carrier-pigeon");
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  for (const std::string& name : names) EXPECT_NE(s.message().find(name), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kolo
