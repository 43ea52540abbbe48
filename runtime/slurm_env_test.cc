#include "runtime/slurm_env.h"

#include <gtest/gtest.h>

namespace kolo {
namespace {

std::vector<std::string> expand(const std::string& text) {
  std::vector<std::string> hosts;
  Status s = expand_hostlist(text, 1000, &hosts);
  EXPECT_TRUE(s.is_ok()) << text << ": " << s.message();
  return hosts;
}

using V = std::vector<std::string>;

TEST(Hostlist, PlainNames) {
  EXPECT_EQ(expand("vm"), V({"vm"}));
  EXPECT_EQ(expand("a,b,c"), V({"a", "b", "c"}));
}

TEST(Hostlist, RangesKeepZeroPadding) {
  EXPECT_EQ(expand("node[01-04,07]"), V({"node01", "node02", "node03", "node04", "node07"}));
  EXPECT_EQ(expand("n[8-11]"), V({"n8", "n9", "n10", "n11"}));
  EXPECT_EQ(expand("n[098-101]"), V({"n098", "n099", "n100", "n101"}));
}

TEST(Hostlist, CommasInsideBracketsDoNotSplit) {
  EXPECT_EQ(expand("a1,b[2-3]"), V({"a1", "b2", "b3"}));
  EXPECT_EQ(expand("x[1,3],y"), V({"x1", "x3", "y"}));
}

TEST(Hostlist, SeveralBracketGroupsLastFastest) {
  EXPECT_EQ(expand("rack[1-2]-node[01-02]"), V({"rack1-node01", "rack1-node02", "rack2-node01", "rack2-node02"}));
  EXPECT_EQ(expand("r[1-2]n[3]s"), V({"r1n3s", "r2n3s"}));
}

TEST(Hostlist, FirstHostWithoutExpanding) {
  std::string h;
  ASSERT_TRUE(first_host("node[07-99999999],z", &h).is_ok());
  EXPECT_EQ(h, "node07");
  ASSERT_TRUE(first_host("rack[3-4]-node[01-02]", &h).is_ok());
  EXPECT_EQ(h, "rack3-node01");
  ASSERT_TRUE(first_host("vm", &h).is_ok());
  EXPECT_EQ(h, "vm");
}

TEST(Hostlist, MalformedIsRefusedWithTheText) {
  std::vector<std::string> hosts;
  for (const char* bad : {"", "n[1-", "n[]", "n[2-1]", "n[a]", "n]", ",a", "a,,b", "n[1-2[3]]", "a b", "n[1--2]"}) {
    Status s = expand_hostlist(bad, 1000, &hosts);
    EXPECT_FALSE(s.is_ok()) << "'" << bad << "'";
    EXPECT_NE(s.message().find("hostlist"), std::string::npos) << s.message();
  }
}

TEST(Hostlist, HugeListsAreRefusedNotAllocated) {
  std::vector<std::string> hosts;
  EXPECT_FALSE(expand_hostlist("n[0-999999]x[0-999999]", 1000, &hosts).is_ok());
  EXPECT_FALSE(expand_hostlist("n[0-1000]", 1000, &hosts).is_ok());
  EXPECT_TRUE(expand_hostlist("n[1-1000]", 1000, &hosts).is_ok());
  EXPECT_EQ(hosts.size(), 1000u);
}

TEST(TasksPerNode, RepeatsExpand) {
  std::vector<int> c;
  ASSERT_TRUE(expand_tasks_per_node("2(x3),1", 100, &c).is_ok());
  EXPECT_EQ(c, std::vector<int>({2, 2, 2, 1}));
  ASSERT_TRUE(expand_tasks_per_node("4", 100, &c).is_ok());
  EXPECT_EQ(c, std::vector<int>({4}));
  for (const char* bad : {"", "2(x0)", "2(3)", "x", "2(x3", "2,", "(x2)"}) {
    EXPECT_FALSE(expand_tasks_per_node(bad, 100, &c).is_ok()) << bad;
  }
  EXPECT_FALSE(expand_tasks_per_node("1(x101)", 100, &c).is_ok());
}

TEST(SlurmPort, StableUnprivilegedAndPerStep) {
  int p = slurm_port("1234", "0");
  EXPECT_EQ(p, slurm_port("1234", "0"));
  EXPECT_GE(p, 20000);
  EXPECT_LT(p, 32000);
  EXPECT_NE(p, slurm_port("1234", "1"));
  EXPECT_NE(p, slurm_port("1235", "0"));
}

}  // namespace
}  // namespace kolo
