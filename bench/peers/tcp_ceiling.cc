// The physical ceiling for allreduce over loopback TCP on this machine.
//
// A ring allreduce on N ranks on one host keeps N TCP streams busy at once,
// and every byte is copied by the kernel on both ends, so the best any
// implementation can reach is bounded by what the host's cores can push
// through several concurrent loopback streams. Measuring that directly (plus a
// single stream and a plain single-core memcpy for scale) tells whether a
// busbw figure is near the hardware or far from it. This is a reference, not
// product code, so it uses plain blocking sockets and threads.
//
// The streams' buffers matter as much as the stack. By default each end
// sends from (receives into) one write's worth of memory, which stays in the
// cache: the stack's own ceiling. A 64 MiB allreduce cannot have that: it
// reads its input from memory and writes its result to memory.
// --buffer-bytes B makes each end walk through B bytes instead, one write at
// a time, so that with B the collective's size every byte is read from and
// written to memory as the collective's must be (bench/duel.sh measures both
// and says how it combines them).
//
// The loopback streams run Reno (--congestion NAME another, "system" the
// kernel's default), as kolo's connections within a host do: an algorithm
// that paces, such as BBR, halved them on a VM whose kernel defaults to it.
//
// Usage: tcp_ceiling [--bytes-per-stream B] [--write-bytes W] [--buffer-bytes B] [--congestion NAME]
// Prints:
//   memcpy_1core_GBps X
//   tcp_one_stream_GBps X
//   tcp_two_streams_GBps X
//
// Between hosts (bench/netns_compare.sh: one stream from each emulated host
// to the next, all at once, as a ring's) it is one end of one stream:
//   tcp_ceiling --receive PORT [...]   prints "received BYTES FIRST LAST",
//                                      the wall-clock seconds (CLOCK_REALTIME,
//                                      comparable across the host's
//                                      namespaces) of the first and last byte
//   tcp_ceiling --send ADDR:PORT [...]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void Die(const char* what) {
  std::fprintf(stderr, "tcp_ceiling: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The memcpy figure is the bandwidth one core gets for one copy, which is the
// unit of work a loopback byte costs on each side of the kernel. Pages are
// touched first so page faults are not part of it; median of several rounds.
double MemcpyGBps() {
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  std::vector<char> src(kBytes, 1), dst(kBytes, 0);
  std::vector<double> secs;
  for (int i = 0; i < 15; ++i) {
    auto t0 = Clock::now();
    std::memcpy(dst.data(), src.data(), kBytes);
    auto t1 = Clock::now();
    secs.push_back(Seconds(t0, t1));
    // Keep the copy observable so it cannot be optimised away.
    src[i] = dst[kBytes - 1 - i];
  }
  std::sort(secs.begin(), secs.end());
  return kBytes / secs[secs.size() / 2] / 1e9;
}

// A connected pair of loopback sockets: one end to write, one to read.
struct Stream {
  int tx = -1;
  int rx = -1;
};

// A listening socket on `ip`:`port` (port 0: any free one); *addr is where
// it listens.
int Listen(uint32_t ip, uint16_t port, int backlog, sockaddr_in* addr) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) Die("socket");
  int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  *addr = sockaddr_in{};
  addr->sin_family = AF_INET;
  addr->sin_addr.s_addr = htonl(ip);
  addr->sin_port = htons(port);
  if (bind(listener, reinterpret_cast<sockaddr*>(addr), sizeof *addr) != 0) Die("bind");
  if (listen(listener, backlog) != 0) Die("listen");
  socklen_t len = sizeof *addr;
  if (getsockname(listener, reinterpret_cast<sockaddr*>(addr), &len) != 0) Die("getsockname");
  return listener;
}

// The congestion control of the loopback streams, set before they connect:
// Reno, as kolo's own connections within a host run by default
// (KOLO_TCP_CONGESTION; transport/socket/congestion.h says why); --congestion
// NAME another, "system" the kernel's default.
std::string g_congestion = "reno";

void SetCongestion(int fd) {
  if (g_congestion == "system") return;
  if (setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, g_congestion.data(),
                 static_cast<socklen_t>(g_congestion.size())) != 0) {
    Die(("TCP_CONGESTION " + g_congestion).c_str());
  }
}

// The sending end of a stream to `addr`.
int Dial(const sockaddr_in& addr) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) Die("socket");
  SetCongestion(fd);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) Die("connect");
  // Bulk transfer with large writes: Nagle never matters, but the collective
  // libraries set NODELAY, so do the same to measure the same socket setup.
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

int Accept(int listener) {
  const int fd = accept(listener, nullptr, nullptr);
  if (fd < 0) Die("accept");
  return fd;
}

Stream Connect(int listener, const sockaddr_in& addr) {
  Stream s;
  SetCongestion(listener);  // accepted connections inherit it
  s.tx = Dial(addr);
  s.rx = Accept(listener);
  return s;
}

// Each end walks through its `buffer` bytes a write at a time and wraps
// around, so that a buffer larger than the caches is read (written) from
// memory.
void SendAll(int fd, std::size_t total, std::size_t chunk, const std::vector<char>& buf) {
  const std::size_t buffer = buf.size();
  std::size_t sent = 0, at = 0;
  while (sent < total) {
    if (at == buffer) at = 0;
    std::size_t want = std::min({chunk, total - sent, buffer - at});
    ssize_t n = send(fd, buf.data() + at, want, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      Die("send");
    }
    sent += static_cast<std::size_t>(n);
    at += static_cast<std::size_t>(n);
  }
}

void RecvAll(int fd, std::size_t total, std::size_t chunk, std::vector<char>& buf) {
  const std::size_t buffer = buf.size();
  std::size_t got = 0, at = 0;
  while (got < total) {
    if (at == buffer) at = 0;
    ssize_t n = recv(fd, buf.data() + at, std::min({chunk, total - got, buffer - at}), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      Die("recv");
    }
    if (n == 0) {
      std::fprintf(stderr, "tcp_ceiling: peer closed early\n");
      std::exit(1);
    }
    got += static_cast<std::size_t>(n);
    at += static_cast<std::size_t>(n);
  }
}

// Moves `bytes` over each of `streams` concurrent connections, a sender and a
// receiver thread per stream, and returns the aggregate rate. The clock spans
// from before the first thread starts to after the last byte is received, so
// it is the rate a collective waiting on all its streams would see.
double StreamsGBps(int streams, std::size_t bytes, std::size_t chunk, std::size_t buffer) {
  sockaddr_in addr;
  // Any free port: runs must not collide with each other.
  const int listener = Listen(INADDR_LOOPBACK, 0, streams, &addr);

  std::vector<Stream> conns;
  for (int i = 0; i < streams; ++i) conns.push_back(Connect(listener, addr));
  close(listener);

  // Every buffer's pages are touched before the clock starts.
  std::vector<std::vector<char>> sources(streams, std::vector<char>(buffer, 7));
  std::vector<std::vector<char>> sinks(streams, std::vector<char>(buffer, 0));
  std::vector<std::thread> threads;
  auto t0 = Clock::now();
  for (int i = 0; i < streams; ++i) {
    threads.emplace_back(SendAll, conns[i].tx, bytes, chunk, std::cref(sources[i]));
    threads.emplace_back(RecvAll, conns[i].rx, bytes, chunk, std::ref(sinks[i]));
  }
  for (auto& t : threads) t.join();
  auto t1 = Clock::now();

  for (const Stream& s : conns) {
    close(s.tx);
    close(s.rx);
  }
  return static_cast<double>(streams) * bytes / Seconds(t0, t1) / 1e9;
}

double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One end of one stream between hosts: `bytes` in, timed from the first
// byte to the last.
int ReceiveOne(int port, std::size_t bytes, std::size_t chunk, std::size_t buffer) {
  sockaddr_in addr;
  const int listener = Listen(INADDR_ANY, static_cast<uint16_t>(port), 1, &addr);
  const int fd = Accept(listener);
  close(listener);
  std::vector<char> buf(buffer, 0);
  RecvAll(fd, 1, 1, buf);  // the clock starts at the first byte
  const double t0 = WallSeconds();
  RecvAll(fd, bytes - 1, chunk, buf);
  const double t1 = WallSeconds();
  close(fd);
  std::printf("received %zu %.6f %.6f\n", bytes, t0, t1);
  return 0;
}

int SendOne(const std::string& to, std::size_t bytes, std::size_t chunk, std::size_t buffer) {
  const auto colon = to.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (colon == std::string::npos || inet_pton(AF_INET, to.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    std::fprintf(stderr, "tcp_ceiling: --send wants ADDR:PORT, got '%s'\n", to.c_str());
    return 2;
  }
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(to.c_str() + colon + 1)));
  const int fd = Dial(addr);
  const std::vector<char> buf(buffer, 7);
  SendAll(fd, bytes, chunk, buf);
  close(fd);
  return 0;
}

std::size_t ParseSize(const char* flag, const char* text) {
  char* end = nullptr;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || v == 0) {
    std::fprintf(stderr, "tcp_ceiling: bad value '%s' for %s\n", text, flag);
    std::exit(2);
  }
  return static_cast<std::size_t>(v);
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t bytes = std::size_t{2} << 30;  // long enough to swamp start-up
  std::size_t chunk = std::size_t{4} << 20;  // big writes: syscall cost is noise
  std::size_t buffer = 0;                     // 0: one write's worth
  int receive_port = 0;
  std::string send_to;
  for (int i = 1; i < argc; i += 2) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "tcp_ceiling: missing value for %s\n", argv[i]);
      return 2;
    }
    if (flag == "--bytes-per-stream") {
      bytes = ParseSize(argv[i], argv[i + 1]);
    } else if (flag == "--write-bytes") {
      chunk = ParseSize(argv[i], argv[i + 1]);
    } else if (flag == "--buffer-bytes") {
      buffer = ParseSize(argv[i], argv[i + 1]);
    } else if (flag == "--receive") {
      receive_port = static_cast<int>(ParseSize(argv[i], argv[i + 1]));
    } else if (flag == "--send") {
      send_to = argv[i + 1];
    } else if (flag == "--congestion") {
      g_congestion = argv[i + 1];
    } else {
      std::fprintf(stderr,
                   "usage: tcp_ceiling [--bytes-per-stream B] [--write-bytes W] [--buffer-bytes B]\n"
                   "                   [--congestion NAME|system] [--receive PORT | --send ADDR:PORT]\n");
      return 2;
    }
  }

  if (buffer == 0) buffer = chunk;
  if (receive_port > 0) return ReceiveOne(receive_port, bytes, chunk, buffer);
  if (!send_to.empty()) return SendOne(send_to, bytes, chunk, buffer);
  std::printf("# loopback TCP ceiling: %zu bytes per stream, %zu-byte writes, %zu-byte buffers at each end, "
              "congestion control %s, GB = 1e9 bytes, %u hardware threads\n",
              bytes, chunk, buffer, g_congestion.c_str(), std::thread::hardware_concurrency());
  std::printf("memcpy_1core_GBps %.3f\n", MemcpyGBps());
  std::fflush(stdout);
  std::printf("tcp_one_stream_GBps %.3f\n", StreamsGBps(1, bytes, chunk, buffer));
  std::fflush(stdout);
  std::printf("tcp_two_streams_GBps %.3f\n", StreamsGBps(2, bytes, chunk, buffer));
  return 0;
}
