#include "runtime/launch_env.h"

#include <cstdlib>

#include <gtest/gtest.h>

#include "runtime/slurm_env.h"

namespace kolo {
namespace {

const char* kAll[] = {"KOLO_RANK", "KOLO_WORLD_SIZE", "KOLO_LOCAL_RANK", "KOLO_LOCAL_WORLD_SIZE", "KOLO_MASTER_ADDR",
                      "KOLO_MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                      "MASTER_PORT", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                      "OMPI_COMM_WORLD_LOCAL_SIZE", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "PMI_RANK",
                      "PMI_SIZE", "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RUN_ID",
                      "TORCHELASTIC_RESTART_COUNT", "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
                      "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_STEP_ID", "SLURM_STEPID", "SLURM_NODEID",
                      "SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE",
                      "OMPI_MCA_ess_base_jobid", "PMIX_NAMESPACE"};

class LaunchEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* v : kAll) unsetenv(v);
  }
  void TearDown() override { SetUp(); }

  // Only `vars` set (as a launcher would), then read.
  static LaunchInfo launched(std::initializer_list<std::pair<const char*, const char*>> vars) {
    for (const char* v : kAll) unsetenv(v);
    for (const auto& kv : vars) setenv(kv.first, kv.second, 1);
    LaunchInfo li;
    Status s = read_launch_env(&li);
    EXPECT_TRUE(s.is_ok()) << s.message();
    return li;
  }
};

void expect_ranks(const LaunchInfo& li, int rank, int world_size, int local_rank, int local_size) {
  EXPECT_EQ(li.rank, rank);
  EXPECT_EQ(li.world_size, world_size);
  EXPECT_EQ(li.local_rank, local_rank);
  EXPECT_EQ(li.local_size, local_size);
}

TEST_F(LaunchEnv, KoloVariables) {
  LaunchInfo li = launched({{"KOLO_RANK", "2"}, {"KOLO_WORLD_SIZE", "4"}, {"KOLO_LOCAL_RANK", "0"},
                            {"KOLO_LOCAL_WORLD_SIZE", "2"}, {"KOLO_MASTER_ADDR", "10.1.2.3"},
                            {"KOLO_MASTER_PORT", "29500"}});
  expect_ranks(li, 2, 4, 0, 2);
  EXPECT_EQ(li.master_addr, "10.1.2.3");
  EXPECT_EQ(li.master_port, 29500);
}

TEST_F(LaunchEnv, KoloWinsOverTorchrun) {
  LaunchInfo li = launched({{"KOLO_RANK", "1"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"},
                            {"MASTER_PORT", "1"}});
  EXPECT_EQ(li.rank, 1);
  EXPECT_EQ(li.local_rank, -1) << "no local rank given: derived at rendezvous";
}

TEST_F(LaunchEnv, OpenMpiNames) {
  LaunchInfo li = launched({{"MASTER_ADDR", "m"}, {"MASTER_PORT", "7"}, {"OMPI_COMM_WORLD_RANK", "3"},
                            {"OMPI_COMM_WORLD_SIZE", "8"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}});
  expect_ranks(li, 3, 8, 1, 4);
}

TEST_F(LaunchEnv, SlurmNames) {
  LaunchInfo li = launched({{"MASTER_ADDR", "m"}, {"MASTER_PORT", "7"}, {"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"},
                            {"SLURM_LOCALID", "2"}});
  EXPECT_EQ(li.rank, 5);
  EXPECT_EQ(li.world_size, 6);
  EXPECT_EQ(li.local_rank, 2);
}

TEST_F(LaunchEnv, ErrorsNameTheProblem) {
  LaunchInfo li;
  Status s = read_launch_env(&li);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("KOLO_RANK"), std::string::npos);
  setenv("KOLO_RANK", "x", 1);
  s = read_launch_env(&li);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("KOLO_RANK='x'"), std::string::npos);
  setenv("KOLO_RANK", "4", 1);
  setenv("KOLO_WORLD_SIZE", "4", 1);
  EXPECT_EQ(read_launch_env(&li).code(), Code::kInvalidArgument);
  setenv("KOLO_RANK", "1", 1);
  s = read_launch_env(&li);
  EXPECT_NE(s.message().find("KOLO_MASTER_ADDR"), std::string::npos);
}

TEST_F(LaunchEnv, SingleRankNeedsNoMaster) {
  setenv("KOLO_RANK", "0", 1);
  setenv("KOLO_WORLD_SIZE", "1", 1);
  LaunchInfo li;
  ASSERT_TRUE(read_launch_env(&li).is_ok());
  EXPECT_EQ(li.master_addr, "127.0.0.1");
}

TEST_F(LaunchEnv, TorchrunAgentStoreIsJoinedUnderARunAndRestartPrefix) {
  LaunchInfo li = launched({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"},
                            {"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RUN_ID", "none"},
                            {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_TRUE(li.torch_agent_store);
  EXPECT_EQ(li.torch_store_prefix, "/kolo/none/2/");
  EXPECT_EQ(li.master_port, 29500);
  for (const char* yes : {"1", "true", "True"}) {
    setenv("TORCHELASTIC_USE_AGENT_STORE", yes, 1);
    ASSERT_TRUE(read_launch_env(&li).is_ok());
    EXPECT_TRUE(li.torch_agent_store) << yes;
  }
  setenv("TORCHELASTIC_USE_AGENT_STORE", "False", 1);
  ASSERT_TRUE(read_launch_env(&li).is_ok());
  EXPECT_FALSE(li.torch_agent_store);
}

TEST_F(LaunchEnv, WithoutAnAgentStoreNothingChanges) {
  LaunchInfo li = launched({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "9"}});
  EXPECT_FALSE(li.torch_agent_store);
  // kolo's own master wins over the agent's store.
  li = launched({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "9"},
                 {"KOLO_MASTER_ADDR", "k"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  EXPECT_FALSE(li.torch_agent_store);
  EXPECT_EQ(li.master_addr, "k");
}

TEST_F(LaunchEnv, SrunNeedsNoConfiguration) {
  LaunchInfo li = launched({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "7"}, {"SLURM_LOCALID", "1"},
                            {"SLURM_NODEID", "2"}, {"SLURM_STEP_NODELIST", "node[07-09],x"},
                            {"SLURM_JOB_NODELIST", "other"}, {"SLURM_STEP_TASKS_PER_NODE", "2(x3),1"},
                            {"SLURM_JOB_ID", "42"}, {"SLURM_STEP_ID", "0"}});
  expect_ranks(li, 5, 7, 1, 2);
  EXPECT_EQ(li.master_addr, "node07");
  EXPECT_EQ(li.master_port, slurm_port("42", "0"));
  li = launched({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "a1,b[2-3]"},
                 {"SLURM_JOB_ID", "42"}, {"SLURM_NTASKS_PER_NODE", "2"}, {"KOLO_MASTER_PORT", "1234"}});
  EXPECT_EQ(li.master_addr, "a1");
  EXPECT_EQ(li.master_port, 1234);
  EXPECT_EQ(li.local_size, 2);
  // One node: loopback, whether or not the node's name resolves.
  li = launched({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_NODELIST", "vm"}, {"SLURM_JOB_ID", "7"}});
  EXPECT_EQ(li.master_addr, "127.0.0.1");
  li = launched({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_STEP_NODELIST", "n[3-3]"}, {"SLURM_JOB_ID", "7"}});
  EXPECT_EQ(li.master_addr, "127.0.0.1");
}

TEST_F(LaunchEnv, SrunErrorsNameTheVariable) {
  setenv("SLURM_PROCID", "0", 1);
  setenv("SLURM_NTASKS", "2", 1);
  LaunchInfo li;
  Status s = read_launch_env(&li);
  EXPECT_NE(s.message().find("SLURM_STEP_NODELIST"), std::string::npos) << s.message();
  setenv("SLURM_STEP_NODELIST", "n[1-", 1);
  s = read_launch_env(&li);
  EXPECT_NE(s.message().find("SLURM_STEP_NODELIST"), std::string::npos) << s.message();
}

TEST_F(LaunchEnv, MpirunOnOneHostNeedsNoConfiguration) {
  LaunchInfo li = launched({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                            {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                            {"OMPI_MCA_ess_base_jobid", "805502977"}});
  EXPECT_EQ(li.master_addr, "127.0.0.1");
  EXPECT_GE(li.master_port, 20000);
  EXPECT_LT(li.master_port, 40000);
  LaunchInfo other = launched({{"OMPI_COMM_WORLD_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "4"},
                               {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}, {"OMPI_MCA_ess_base_jobid", "805502977"}});
  EXPECT_EQ(other.master_port, li.master_port) << "every rank derives the same port";
}

TEST_F(LaunchEnv, MpirunAcrossHostsSaysWhatToPass) {
  setenv("OMPI_COMM_WORLD_RANK", "0", 1);
  setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "2", 1);
  setenv("OMPI_MCA_ess_base_jobid", "1", 1);
  LaunchInfo li;
  Status s = read_launch_env(&li);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("-x KOLO_MASTER_ADDR="), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("-x KOLO_MASTER_PORT="), std::string::npos) << s.message();
  setenv("KOLO_MASTER_ADDR", "10.0.0.1", 1);
  setenv("KOLO_MASTER_PORT", "4000", 1);
  ASSERT_TRUE(read_launch_env(&li).is_ok());
  EXPECT_EQ(li.master_addr, "10.0.0.1");
  EXPECT_EQ(li.master_port, 4000);
}

}  // namespace
}  // namespace kolo
