// The flight recorder's ring, its JSON and its registry: the last K calls
// kept, oldest first, with states, arguments and escaped errors; SIGUSR1
// dumps every registered communicator; a removed one is not called again.
#include "runtime/flight_recorder.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace kolo {
namespace {

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(FlightRecorder, KeepsTheLastCallsOldestFirst) {
  FlightRecorder recorder(4);
  for (int i = 0; i < 10; ++i) {
    const uint64_t s = recorder.begin(CallRecord("allreduce", DataType::kFloat32, 100 + i, ReduceOp::kSum));
    EXPECT_EQ(s, static_cast<uint64_t>(i));
    if (i < 9) recorder.end(s, i == 8 ? timeout_error("no progress from \"rank 3\"\n") : Status::ok());
  }
  const std::string json = recorder.to_json({"job", "world", 2, 4, "host"}, "asked");
  EXPECT_EQ(occurrences(json, "\"seq\""), 4u);
  EXPECT_EQ(json.find("\"seq\": 5,"), std::string::npos);
  const size_t six = json.find("\"seq\": 6,"), nine = json.find("\"seq\": 9,");
  ASSERT_NE(six, std::string::npos);
  ASSERT_NE(nine, std::string::npos);
  EXPECT_LT(six, nine);
  EXPECT_NE(json.find("\"count\": 109"), std::string::npos);
  EXPECT_NE(json.find("\"dtype\": \"float32\""), std::string::npos);
  EXPECT_NE(json.find("\"op\": \"sum\""), std::string::npos);
  EXPECT_EQ(occurrences(json, "\"state\": \"completed\""), 2u);  // 6 and 7
  EXPECT_EQ(occurrences(json, "\"state\": \"failed\""), 1u);     // 8
  EXPECT_EQ(occurrences(json, "\"state\": \"started\""), 1u);    // 9, never ended
  EXPECT_NE(json.find("no progress from \\\"rank 3\\\"\\u000a"), std::string::npos) << json;
  EXPECT_NE(json.find("\"rank\": 2, \"size\": 4"), std::string::npos);
  EXPECT_NE(json.find("\"reason\": \"asked\""), std::string::npos);
}

// Calls are recorded without a lock, so a dump taken while they run must
// still show each entry as one state of one call: its count is the one
// that call was made with, and an ended call's end is not before its start.
// A torn read needs a dump to land inside a write of a few stores, which
// this loop rarely makes happen; under TSan (tools/test.sh) it also checks
// that recording and dumping race on nothing.
TEST(FlightRecorder, DumpsTakenWhileCallsRunShowWholeEntries) {
  FlightRecorder recorder(8);
  std::atomic<bool> stop{false};
  std::thread calls([&] {
    for (uint64_t i = 0; !stop.load(); ++i) {
      const uint64_t s = recorder.begin(CallRecord("allreduce", DataType::kFloat32, 1000 + 7 * i, ReduceOp::kSum));
      recorder.end(s, i % 5 == 0 ? timeout_error("call " + std::to_string(i)) : Status::ok());
    }
  });
  size_t entries_checked = 0;
  for (int dump = 0; dump < 300 || entries_checked < 100; ++dump) {
    const std::string json = recorder.to_json({"job", "world", 0, 2, "host"}, "live");
    std::istringstream lines(json);
    std::string line;
    uint64_t last_seq = 0;
    bool first = true;
    while (std::getline(lines, line)) {
      if (line.find("\"seq\": ") == std::string::npos) continue;
      unsigned long long seq = 0, count = 0, start = 0, end = 0;
      char state[16] = {};
      ASSERT_EQ(std::sscanf(line.c_str(),
                            "  {\"seq\": %llu, \"what\": \"allreduce\", \"dtype\": \"float32\", \"op\": \"sum\", "
                            "\"count\": %llu, \"root\": -1, \"state\": \"%15[a-z]\", \"start_ns\": %llu, "
                            "\"end_ns\": %llu",
                            &seq, &count, state, &start, &end),
                5)
          << line;
      EXPECT_EQ(count, 1000 + 7 * seq) << line;
      EXPECT_TRUE(first || seq > last_seq) << json;
      const std::string st = state;
      if (st == "started") {
        EXPECT_EQ(end, 0u) << line;
      } else {
        EXPECT_GE(end, start) << line;
        EXPECT_EQ(st == "failed", seq % 5 == 0) << line;
        if (st == "failed") {
          EXPECT_NE(line.find("\"error\": \"TIMEOUT: call " + std::to_string(seq)), std::string::npos) << line;
        }
      }
      last_seq = seq;
      first = false;
      ++entries_checked;
    }
    if (dump > 100000) break;
  }
  stop = true;
  calls.join();
  EXPECT_GE(entries_checked, 100u);
}

TEST(FlightRecorder, NoEntriesRecordsNothing) {
  FlightRecorder recorder(0);
  recorder.end(recorder.begin(CallRecord("barrier")), Status::ok());
  EXPECT_EQ(recorder.to_json({}, "").find("\"seq\""), std::string::npos);
}

TEST(FlightRecorder, PathsAreSafeFileNames) {
  EXPECT_EQ(flight_record_path("/d", {"10.0.0.1:29500/split0.1/", "split0.1", 3, 4, "h"}),
            "/d/kolo-flight.10.0.0.1_29500_split0.1_.split0.1.rank3.json");
}

TEST(FlightRecorder, SigusrOneDumpsEveryRegisteredOne) {
  std::atomic<int> a{0}, b{0};
  std::string reason;
  const uint64_t ia = FlightRecorderRegistry::add([&](const std::string& r) {
    reason = r;
    ++a;
  });
  const uint64_t ib = FlightRecorderRegistry::add([&](const std::string&) { ++b; });
  ASSERT_EQ(::kill(::getpid(), SIGUSR1), 0);  // the handler is ours: SIGUSR1 had its default action
  for (int i = 0; i < 500 && (a.load() == 0 || b.load() == 0); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(a.load(), 1);
  EXPECT_EQ(b.load(), 1);
  EXPECT_EQ(reason, "SIGUSR1");
  FlightRecorderRegistry::remove(ia);
  FlightRecorderRegistry::dump_all("again");
  EXPECT_EQ(a.load(), 1);
  EXPECT_EQ(b.load(), 2);
  FlightRecorderRegistry::remove(ib);
}

TEST(FlightRecorder, WritesFilesWhole) {
  const std::string path = ::testing::TempDir() + "/flight.json";
  ASSERT_TRUE(write_file_atomically(path, "{\"x\": 1}\n").is_ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(text.str(), "{\"x\": 1}\n");
  EXPECT_EQ(write_file_atomically("/nonexistent-dir/x.json", "").code(), Code::kInvalidUsage);
}

// Two threads of one process dump to the same path at once (a failing call
// and the SIGUSR1 thread): a reader always finds one of the texts whole.
TEST(FlightRecorder, ConcurrentWritesToOnePathStayWhole) {
  const std::string path = ::testing::TempDir() + "/flight-concurrent.json";
  const std::string a(64 * 1024, 'a'), b(64 * 1024, 'b');
  ASSERT_TRUE(write_file_atomically(path, a).is_ok());
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (const std::string* text : {&a, &b}) {
    writers.emplace_back([&, text] {
      while (!stop.load()) EXPECT_TRUE(write_file_atomically(path, *text).is_ok());
    });
  }
  int torn = 0;
  for (int i = 0; i < 2000; ++i) {
    std::ifstream in(path);
    std::stringstream read;
    read << in.rdbuf();
    if (read.str() != a && read.str() != b) ++torn;
  }
  stop = true;
  for (auto& t : writers) t.join();
  EXPECT_EQ(torn, 0) << "reads that found neither text whole";
}

}  // namespace
}  // namespace kolo
