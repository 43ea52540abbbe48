// kolo_config_t (config over environment, field errors, size and version)
// and kolo_get_unique_id / kolo_comm_init_rank with ranks as threads.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <gtest/gtest.h>

#include "bindings/c/config_from_c.h"
#include "bindings/c/kolo.h"
#include "runtime/config.h"

namespace {

TEST(ConfigTest, ConfigWinsOverEnvironmentAndUnsetFieldsTakeIt) {
  ::setenv("KOLO_SEGMENT_BYTES", "4096", 1);
  ::setenv("KOLO_PIPELINE_DEPTH", "7", 1);
  ::setenv("KOLO_TRANSPORT", "tcp", 1);
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  config.segment_bytes = 8192;
  config.timeout_s = 12.5;
  config.bind_address = "127.0.0.1";
  kolo::Config c;
  ASSERT_TRUE(kolo_c::config_from_c(&config, &c).is_ok());
  EXPECT_EQ(c.segment_bytes, 8192);      // config over KOLO_SEGMENT_BYTES
  EXPECT_EQ(c.pipeline_depth, 7);        // unset: the environment's
  EXPECT_EQ(c.transport, "tcp");         // unset: the environment's
  EXPECT_EQ(c.timeout_s, 12.5);
  EXPECT_EQ(c.bind_address, "127.0.0.1");
  EXPECT_EQ(c.sockets_per_peer, kolo::Config().sockets_per_peer);  // neither: the default
  kolo::Config from_null;
  ASSERT_TRUE(kolo_c::config_from_c(nullptr, &from_null).is_ok());
  EXPECT_EQ(from_null.segment_bytes, 4096);
  ::unsetenv("KOLO_SEGMENT_BYTES");
  ::unsetenv("KOLO_PIPELINE_DEPTH");
  ::unsetenv("KOLO_TRANSPORT");
}

std::string error_of(const kolo_config_t& config) {
  kolo::Config c;
  kolo::Status s = kolo_c::config_from_c(&config, &c);
  EXPECT_EQ(s.code(), kolo::Code::kInvalidArgument) << s.to_string();
  return s.message();
}

TEST(ConfigTest, BadFieldIsNamed) {
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  config.segment_bytes = 3;
  EXPECT_NE(error_of(config).find("config.segment_bytes = 3: must be 0 (automatic) or at least 64"), std::string::npos);
  config = KOLO_CONFIG_INITIALIZER;
  config.pipeline_depth = 65;
  EXPECT_NE(error_of(config).find("config.pipeline_depth = 65: must be at most 64"), std::string::npos);
  config = KOLO_CONFIG_INITIALIZER;
  config.checksum = 2;
  EXPECT_NE(error_of(config).find("config.checksum"), std::string::npos);
  config = KOLO_CONFIG_INITIALIZER;
  config.timeout_s = 0;
  EXPECT_NE(error_of(config).find("config.timeout_s = 0: must be at least 0.001"), std::string::npos);
  config = KOLO_CONFIG_INITIALIZER;
  config.transport = "udp";
  EXPECT_NE(error_of(config).find("config.transport='udp'"), std::string::npos);
  // The environment's check uses the same limits.
  ::setenv("KOLO_SEGMENT_BYTES", "3", 1);
  kolo::Config c;
  EXPECT_FALSE(kolo::load_config(&c).is_ok());
  ::unsetenv("KOLO_SEGMENT_BYTES");
}

TEST(ConfigTest, SizeAndVersionAreChecked) {
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  config.version = KOLO_CONFIG_VERSION + 1;
  EXPECT_NE(error_of(config).find("config.version"), std::string::npos);
  config = KOLO_CONFIG_INITIALIZER;
  config.version = 0;
  EXPECT_NE(error_of(config).find("config.version"), std::string::npos);
  config = KOLO_CONFIG_INITIALIZER;
  config.size = offsetof(kolo_config_t, segment_bytes);
  EXPECT_NE(error_of(config).find("config.size"), std::string::npos);
}

TEST(ConfigTest, DefaultsLieUnderTheEnvironment) {
  ::setenv("KOLO_SPIN_US", "300", 1);
  kolo_config_t defaults = KOLO_CONFIG_INITIALIZER;
  defaults.spin_us = 50;    // under KOLO_SPIN_US
  defaults.spin_yield = 1;  // no variable: the default's
  defaults.timeout_s = 9;
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  config.timeout_s = 12;  // over the defaults
  config.defaults = &defaults;
  kolo::Config c;
  ASSERT_TRUE(kolo_c::config_from_c(&config, &c).is_ok());
  EXPECT_EQ(c.spin_us, 300);
  EXPECT_EQ(c.spin_yield, 1);
  EXPECT_EQ(c.timeout_s, 12);
  EXPECT_EQ(c.pipeline_depth, kolo::Config().pipeline_depth);
  ::unsetenv("KOLO_SPIN_US");
  defaults.pipeline_depth = 0;
  EXPECT_NE(error_of(config).find("config.defaults.pipeline_depth = 0"), std::string::npos);
}

TEST(ConfigTest, VersionOneConfigsStillWork) {
  // A program built against version 1's kolo.h passes the smaller struct:
  // the fields of version 2 are unset, whatever lies beyond it in memory.
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  config.version = 1;
  config.size = offsetof(kolo_config_t, algorithm);
  config.segment_bytes = 8192;
  config.algorithm = "not read";
  kolo::Config c;
  ASSERT_TRUE(kolo_c::config_from_c(&config, &c).is_ok());
  EXPECT_EQ(c.segment_bytes, 8192);
  EXPECT_EQ(c.algorithm, "auto");
}

TEST(ConfigTest, VersionTwoSettings) {
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  config.algorithm = "ring";
  config.host_name = "node-7";
  config.interface_name = "lo";
  kolo::Config c;
  ASSERT_TRUE(kolo_c::config_from_c(&config, &c).is_ok());
  EXPECT_EQ(c.algorithm, "ring");
  EXPECT_EQ(c.host_name, "node-7");
  EXPECT_EQ(c.bind_address, "127.0.0.1");  // the interface's address
  for (const char* every : {"auto", "ring", "recursive_doubling", "halving_doubling", "shared_memory", "tree",
                            "hierarchical"}) {
    config.algorithm = every;
    ASSERT_TRUE(kolo_c::config_from_c(&config, &c).is_ok()) << every;
    EXPECT_EQ(c.algorithm, every);
  }
  config.algorithm = "trees";
  EXPECT_NE(error_of(config).find("config.algorithm='trees'"), std::string::npos);
}

TEST(ConfigTest, VersionFourLinkCosts) {
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  config.link_costs = "remote=50/0.125";
  kolo::Config c;
  ASSERT_TRUE(kolo_c::config_from_c(&config, &c).is_ok());
  EXPECT_EQ(c.link_costs, "remote=50/0.125");
  config.link_costs = "remote=fast";
  const std::string error = error_of(config);
  EXPECT_NE(error.find("config.link_costs='remote=fast': 'remote=fast' is not CLASS=US/GBPS"), std::string::npos)
      << error;
  // A version 3 caller's struct ends before the field: it stays unset.
  config.version = 3;
  config.size = offsetof(kolo_config_t, link_costs);
  kolo::Config older;
  ASSERT_TRUE(kolo_c::config_from_c(&config, &older).is_ok());
  EXPECT_EQ(older.link_costs, "");
}

TEST(ConfigTest, VersionFiveWireFormat) {
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  config.wire_format = "int8";
  kolo::Config c;
  ASSERT_TRUE(kolo_c::config_from_c(&config, &c).is_ok());
  EXPECT_EQ(c.wire_format, "int8");
  config.wire_format = "fp4";
  const std::string error = error_of(config);
  EXPECT_NE(error.find("config.wire_format='fp4': use native, bf16, fp16, fp8_e4m3, fp8_e5m2 or int8"),
            std::string::npos)
      << error;
  // A version 4 caller's struct ends before the field: it stays the default.
  config.version = 4;
  config.size = offsetof(kolo_config_t, wire_format);
  kolo::Config older;
  ASSERT_TRUE(kolo_c::config_from_c(&config, &older).is_ok());
  EXPECT_EQ(older.wire_format, "native");
}

// kolo.h's struct holds the settings table's rows, in its order, each of the
// type its kind needs; KOLO_CONFIG_INITIALIZER leaves every one unset.
bool unset(int64_t v) { return v == KOLO_CONFIG_UNSET_INT; }
bool unset(double v) { return v == KOLO_CONFIG_UNSET_DOUBLE; }
bool unset(const char* v) { return v == nullptr; }
#define KOLO_C_TYPE_Int int64_t
#define KOLO_C_TYPE_Bool int64_t
#define KOLO_C_TYPE_Double double
#define KOLO_C_TYPE_Text const char*
#define KOLO_C_TYPE_Transport const char*
#define KOLO_C_TYPE_Algorithm const char*
#define KOLO_C_TYPE_LinkCosts const char*
#define KOLO_C_TYPE_WireFormat const char*
#define KOLO_CHECK_TYPE(field, kind, variable, initial, min, max, shown, meaning)             \
  static_assert(std::is_same<decltype(kolo_config_t::field), KOLO_C_TYPE_##kind>::value, \
                "kolo_config_t::" #field " has the type of a " #kind " setting");
KOLO_SETTINGS(KOLO_CHECK_TYPE)
#undef KOLO_CHECK_TYPE

TEST(ConfigTest, KoloHAgreesWithTheSettingsTable) {
  const kolo_config_t initial = KOLO_CONFIG_INITIALIZER;
  std::vector<size_t> offsets;
#define KOLO_ROW(field, kind, variable, value, min, max, shown, meaning) \
  offsets.push_back(offsetof(kolo_config_t, field));                     \
  EXPECT_TRUE(unset(initial.field)) << #field " is set by KOLO_CONFIG_INITIALIZER";
  KOLO_SETTINGS(KOLO_ROW)
#undef KOLO_ROW
  EXPECT_TRUE(initial.defaults == nullptr);
  EXPECT_EQ(initial.version, unsigned(KOLO_CONFIG_VERSION));
  // In order, and nothing else in the struct but size, version and the
  // defaults pointer (every field is 8 bytes).
  for (size_t i = 1; i < offsets.size(); ++i) EXPECT_GT(offsets[i], offsets[i - 1]) << "row " << i;
  EXPECT_EQ(offsets.front(), offsetof(kolo_config_t, timeout_s));
  EXPECT_EQ(sizeof(kolo_config_t), offsets.front() + 8 * (offsets.size() + 1));
}

TEST(ConfigTest, DescribeListsEveryField) {
  const std::string text = kolo_config_describe();
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    lines.push_back(text.substr(start, end - start));
  }
  ASSERT_EQ(lines.size(), size_t(1 + (kolo::settings_end() - kolo::settings_begin()) + 1));
  EXPECT_EQ(lines[0], "kolo_config_t\t" + std::to_string(KOLO_CONFIG_VERSION) + "\t" +
                          std::to_string(sizeof(kolo_config_t)));
  EXPECT_EQ(lines[1].rfind("timeout_s\tdouble\t" + std::to_string(offsetof(kolo_config_t, timeout_s)) +
                               "\tKOLO_TIMEOUT_S\t300\t0.001\t",
                           0),
            0u)
      << lines[1];
  EXPECT_EQ(lines.back().rfind("tcp_congestion\tstring\t", 0), 0u) << lines.back();
  bool found_defaults = false;
  for (const auto& line : lines) {
    if (line.rfind("defaults\tconfig\t" + std::to_string(offsetof(kolo_config_t, defaults)) + "\t", 0) == 0) {
      found_defaults = true;
    }
  }
  EXPECT_TRUE(found_defaults);
}

TEST(ConfigTest, InitRankRefusesSecretAndBadIds) {
  kolo_unique_id_t id;
  ASSERT_EQ(kolo_get_unique_id(&id), KOLO_SUCCESS);
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  config.secret = "mine";
  kolo_comm_t comm = nullptr;
  EXPECT_EQ(kolo_comm_init_rank(&comm, 1, &id, 0, &config), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("config.secret"), std::string::npos);
  kolo_unique_id_t zero;
  std::memset(&zero, 0, sizeof(zero));
  EXPECT_EQ(kolo_comm_init_rank(&comm, 1, &zero, 0, nullptr), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(kolo_comm_init_rank(&comm, 1, &id, 1, nullptr), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(comm, nullptr);
  // The reserved server is still there: a valid init now succeeds.
  ASSERT_EQ(kolo_comm_init_rank(&comm, 1, &id, 0, nullptr), KOLO_SUCCESS);
  kolo_comm_destroy(comm);
}

TEST(ConfigTest, InitFromEnvConfigTakesTheLauncherAndTheConfig) {
  ::setenv("KOLO_RANK", "0", 1);
  ::setenv("KOLO_WORLD_SIZE", "1", 1);
  ::setenv("KOLO_MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("KOLO_MASTER_PORT", "0", 1);
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  config.segment_bytes = 3;
  kolo_comm_t comm = nullptr;
  EXPECT_EQ(kolo_comm_init_from_env_config(&comm, &config), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("config.segment_bytes = 3"), std::string::npos);
  EXPECT_EQ(comm, nullptr);
  config = KOLO_CONFIG_INITIALIZER;
  config.job_id = "config-test/init-1";
  config.spin_us = 50;
  ASSERT_EQ(kolo_comm_init_from_env_config(&comm, &config), KOLO_SUCCESS) << kolo_last_error();
  float x = 2.5f;
  ASSERT_EQ(kolo_allreduce(comm, &x, &x, 1, KOLO_FLOAT32, KOLO_SUM), KOLO_SUCCESS);
  EXPECT_EQ(x, 2.5f);
  kolo_comm_destroy(comm);
  for (const char* v : {"KOLO_RANK", "KOLO_WORLD_SIZE", "KOLO_MASTER_ADDR", "KOLO_MASTER_PORT"}) ::unsetenv(v);
}

// N ranks as threads: ids passed in memory, an allreduce checked.
double run_world(int n) {
  const auto start = std::chrono::steady_clock::now();
  kolo_unique_id_t id;
  EXPECT_EQ(kolo_get_unique_id(&id), KOLO_SUCCESS);
  std::vector<kolo_comm_t> comms(n, nullptr);
  std::vector<kolo_result_t> results(n, KOLO_ERR_INTERNAL);
  std::vector<std::thread> threads;
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  config.timeout_s = 60;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { results[r] = kolo_comm_init_rank(&comms[r], n, &id, r, &config); });
  }
  for (auto& t : threads) t.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int r = 0; r < n; ++r) EXPECT_EQ(results[r], KOLO_SUCCESS) << "rank " << r;
  threads.clear();
  std::vector<std::vector<float>> out(n, std::vector<float>(1000));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      if (!comms[r]) return;
      std::vector<float> in(1000, static_cast<float>(r + 1));
      results[r] = kolo_allreduce(comms[r], in.data(), out[r].data(), in.size(), KOLO_FLOAT32, KOLO_SUM);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(results[r], KOLO_SUCCESS) << "rank " << r;
    EXPECT_EQ(out[r][999], n * (n + 1) / 2.0f) << "rank " << r;
    int size = 0;
    if (comms[r]) {
      kolo_comm_size(comms[r], &size);
      EXPECT_EQ(size, n);
    }
    kolo_comm_destroy(comms[r]);
  }
  return seconds;
}

TEST(UniqueIdTest, ThreadsOneToEight) {
  for (int n = 1; n <= 8; ++n) {
    const double s = run_world(n);
    std::printf("kolo_comm_init_rank: %d ranks as threads started in %.3f s\n", n, s);
  }
}

TEST(UniqueIdTest, SixteenThreadsStartFast) {
  const double s = run_world(16);
  std::printf("kolo_comm_init_rank: 16 ranks as threads started in %.3f s\n", s);
}

TEST(UniqueIdTest, WrongSecretFailsWithoutHanging) {
  kolo_unique_id_t id;
  ASSERT_EQ(kolo_get_unique_id(&id), KOLO_SUCCESS);
  kolo_unique_id_t other;
  ASSERT_EQ(kolo_get_unique_id(&other), KOLO_SUCCESS);
  // Rank 1 has rank 0's address, port and job but another secret.
  kolo_unique_id_t wrong = other;
  std::memcpy(wrong.internal, id.internal, 88);  // magic, port, address, job: rank 0's
  kolo_config_t config = KOLO_CONFIG_INITIALIZER;
  config.timeout_s = 3;
  kolo_comm_t comms[2] = {nullptr, nullptr};
  kolo_result_t results[2];
  const auto start = std::chrono::steady_clock::now();
  std::thread t0([&] { results[0] = kolo_comm_init_rank(&comms[0], 2, &id, 0, &config); });
  std::thread t1([&] { results[1] = kolo_comm_init_rank(&comms[1], 2, &wrong, 1, &config); });
  t0.join();
  t1.join();
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(results[1] == KOLO_ERR_AUTH || results[1] == KOLO_ERR_TIMEOUT) << results[1];
  EXPECT_TRUE(results[0] == KOLO_ERR_AUTH || results[0] == KOLO_ERR_TIMEOUT) << results[0];
  EXPECT_LT(seconds, 20);
  kolo_comm_destroy(comms[0]);
  kolo_comm_destroy(comms[1]);
}

}  // namespace
