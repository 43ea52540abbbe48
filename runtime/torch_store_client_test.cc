// TorchStoreClient against a real c10d TCPStore: the project's Python
// environment (tools/python_env.sh, with torch) serves one on an ephemeral
// port and answers commands on stdin ("get KEY", "set KEY VALUE"), so the
// test checks both directions.
#include "runtime/torch_store_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <thread>

#include <gtest/gtest.h>

namespace kolo {
namespace {

const char* kServer = R"(
import sys, datetime
try:
    import torch.distributed as d
except Exception as e:
    print("NOTORCH", e, flush=True); sys.exit(0)
s = d.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=60), wait_for_workers=False)
print(s.port, flush=True)
for line in sys.stdin:
    w = line.split()
    if w[0] == "get": print(s.get(w[1]).decode(), flush=True)
    elif w[0] == "set": s.set(w[1], w[2]); print("ok", flush=True)
)";

// The project's interpreter, found as every test finds it: by sourcing
// python_env.sh from the runfiles. "" when the environment is not made.
std::string project_python() {
  const char* src = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  if (!src || !workspace) return "";
  const std::string command = std::string("bash -c '. \"") + src + "/" + workspace +
                              "/tools/python_env.sh\" && [ -f \"$KOLO_VENV_DONE\" ] && printf %s \"$KOLO_PYTHON\"'";
  FILE* p = popen(command.c_str(), "r");
  if (!p) return "";
  char buf[4096] = {0};
  const size_t n = fread(buf, 1, sizeof(buf) - 1, p);
  pclose(p);
  return std::string(buf, n);
}

class TorchStore : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string interpreter = project_python();
    ASSERT_FALSE(interpreter.empty()) << "the project's Python environment is not made: run tools/setup.sh";
    int to_child[2], from_child[2];
    ASSERT_EQ(pipe(to_child), 0);
    ASSERT_EQ(pipe(from_child), 0);
    pid_ = fork();
    ASSERT_GE(pid_, 0);
    if (pid_ == 0) {
      dup2(to_child[0], 0);
      dup2(from_child[1], 1);
      close(to_child[1]);
      close(from_child[0]);
      // Python is not built with the sanitizers: keep their runtime out.
      unsetenv("LD_PRELOAD");
      // argv[0] the whole path: a virtual environment finds itself from it.
      execl(interpreter.c_str(), interpreter.c_str(), "-c", kServer, static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    in_ = fdopen(to_child[1], "w");
    out_ = fdopen(from_child[0], "r");
    std::string first = line();
    ASSERT_NE(first.rfind("NOTORCH", 0), 0u) << interpreter << " cannot import torch: " << first;
    port_ = std::atoi(first.c_str());
    ASSERT_GT(port_, 0) << "python said: " << first;
  }
  void TearDown() override {
    if (in_) fclose(in_);
    if (out_) fclose(out_);
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
  }
  std::string line() {
    char buf[4096];
    if (!fgets(buf, sizeof(buf), out_)) return "";
    std::string s(buf);
    while (!s.empty() && s.back() == '\n') s.pop_back();
    return s;
  }
  std::string python(const std::string& command) {
    fprintf(in_, "%s\n", command.c_str());
    fflush(in_);
    return line();
  }
  std::unique_ptr<TorchStoreClient> client(const std::string& prefix = "/kolo/run/0/") {
    std::unique_ptr<TorchStoreClient> c;
    Status s = TorchStoreClient::connect("127.0.0.1", port_, prefix, 10, Deadline::after_seconds(10), &c);
    EXPECT_TRUE(s.is_ok()) << s.message();
    return c;
  }

  pid_t pid_ = -1;
  FILE* in_ = nullptr;
  FILE* out_ = nullptr;
  int port_ = 0;
};

TEST_F(TorchStore, SetIsSeenByTorchAndTorchsSetBySelf) {
  auto c = client();
  ASSERT_TRUE(c->set("a", "hello").is_ok());
  // torch's Python client adds its own "/" in front of every key.
  EXPECT_EQ(python("get kolo/run/0/a"), "hello");
  EXPECT_EQ(python("set kolo/run/0/b from-python"), "ok");
  std::string v;
  ASSERT_TRUE(c->get_one("b", Deadline::after_seconds(5), &v).is_ok());
  EXPECT_EQ(v, "from-python");
}

TEST_F(TorchStore, SetIfAbsentFirstWriterWins) {
  auto a = client();
  auto b = client();
  std::string cur;
  ASSERT_TRUE(a->set_if_absent("failure", "rank 1 died", Deadline::after_seconds(5), &cur).is_ok());
  EXPECT_EQ(cur, "rank 1 died");
  ASSERT_TRUE(b->set_if_absent("failure", "rank 2 died", Deadline::after_seconds(5), &cur).is_ok());
  EXPECT_EQ(cur, "rank 1 died");
  EXPECT_EQ(python("get kolo/run/0/failure"), "rank 1 died");
}

TEST_F(TorchStore, GetWaitsForAKeySetLater) {
  auto waiter = client();
  auto setter = client();
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(setter->set("late", "1").is_ok());
    EXPECT_TRUE(setter->set("later", "2").is_ok());
  });
  std::vector<std::string> values;
  Status s = waiter->get({"late", "later"}, Deadline::after_seconds(10), &values);
  t.join();
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(values, std::vector<std::string>({"1", "2"}));
}

TEST_F(TorchStore, WaitHasADeadlineNamingTheMissingKeyAndTheStore) {
  auto c = client();
  ASSERT_TRUE(c->set("host/0", "x").is_ok());
  std::vector<std::string> values;
  auto start = std::chrono::steady_clock::now();
  Status s = c->get({"host/0", "host/1"}, Deadline::after_seconds(0.5), &values);
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 5);
  EXPECT_NE(s.message().find("host/1"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("host/0"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("127.0.0.1:" + std::to_string(port_)), std::string::npos) << s.message();
  // The abandoned wait does not confuse the store or this client.
  EXPECT_EQ(python("set kolo/run/0/host/1 y"), "ok");
  ASSERT_TRUE(c->get({"host/0", "host/1"}, Deadline::after_seconds(5), &values).is_ok());
  EXPECT_EQ(values, std::vector<std::string>({"x", "y"}));
  EXPECT_EQ(python("get kolo/run/0/host/0"), "x");
}

TEST_F(TorchStore, PrefixesKeepRestartsApart) {
  auto attempt0 = client("/kolo/run/0/");
  auto attempt1 = client("/kolo/run/1/");
  ASSERT_TRUE(attempt0->set("k", "old").is_ok());
  bool ready = true;
  ASSERT_TRUE(attempt1->check({"k"}, Deadline::after_seconds(5), &ready).is_ok());
  EXPECT_FALSE(ready);
  ASSERT_TRUE(attempt0->check({"k"}, Deadline::after_seconds(5), &ready).is_ok());
  EXPECT_TRUE(ready);
}

TEST_F(TorchStore, AddCounts) {
  auto c = client();
  int64_t sum = 0;
  ASSERT_TRUE(c->add("n", 2, Deadline::after_seconds(5), &sum).is_ok());
  ASSERT_TRUE(c->add("n", 3, Deadline::after_seconds(5), &sum).is_ok());
  EXPECT_EQ(sum, 5);
}

TEST(TorchStoreUnreachable, ConnectFailsByTheDeadlineNamingTheAddress) {
  std::unique_ptr<TorchStoreClient> c;
  // Port 1 on loopback: refused at once, retried until the deadline.
  Status s = TorchStoreClient::connect("127.0.0.1", 1, "/p/", 1, Deadline::after_seconds(0.3), &c);
  EXPECT_EQ(s.code(), Code::kTimeout);
  EXPECT_NE(s.message().find("127.0.0.1:1"), std::string::npos) << s.message();
}

// A store host that is stuck: its kernel takes the connection and the
// requests, and nothing ever answers. Every call ends by its deadline and
// at most a second more (a store's trip), as kolo's own store client does.
TEST(TorchStoreStuck, EveryCallEndsByItsDeadlineAndATrip) {
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  ASSERT_EQ(::listen(listener, 16), 0);  // never accepted: the backlog holds the connections
  socklen_t len = sizeof(sa);
  ::getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len);
  const int port = ntohs(sa.sin_port);
  std::unique_ptr<TorchStoreClient> c;
  ASSERT_TRUE(TorchStoreClient::connect("127.0.0.1", port, "/p/", 0.3, Deadline::after_seconds(1), &c).is_ok());
  const auto took = [](const std::function<Status()>& call) {
    const auto start = std::chrono::steady_clock::now();
    const Status s = call();
    EXPECT_EQ(s.code(), Code::kTimeout) << s.to_string();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::string current;
  EXPECT_LT(took([&] { return c->set_if_absent("a", "1", Deadline::after_seconds(0.3), &current); }), 1.3);
  int64_t sum = 0;
  EXPECT_LT(took([&] { return c->add("n", 1, Deadline::after_seconds(0.3), &sum); }), 1.3);
  bool all_set = false;
  EXPECT_LT(took([&] { return c->check({"a"}, Deadline::after_seconds(0.3), &all_set); }), 1.3);
  std::vector<std::string> values;
  EXPECT_LT(took([&] { return c->get({"a", "b"}, Deadline::after_seconds(0.3), &values); }), 1.3 + 0.3);
  ::close(listener);
}

}  // namespace
}  // namespace kolo
