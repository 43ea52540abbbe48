// Every collective, every dtype x op, over counts that hit the edge cases
// (0, 1, N-1, N, N+1, a prime, many segments, several megabytes), for worlds
// of 1 to 8 ranks running as threads over real TCP loopback, and on split
// communicators of as many (ThreadWorld::AsSplit). Expected values
// come from tests/reference.h, computed without kolo's kernels; every rank's
// result is compared with them byte for byte, which also proves the ranks
// agree bitwise.
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include <thread>

#include "collectives/arena_writes.h"
#include "collectives/pipeline.h"
#include "common/cpu_caches.h"
#include "runtime/op_handle.h"
#include "tests/reference.h"
#include "tests/thread_world.h"

namespace kolo {
namespace {

using Bytes = std::vector<unsigned char>;

// Index of the first differing element, or -1.
long first_difference(const Bytes& got, const Bytes& want, size_t es) {
  if (got.size() != want.size()) return 0;
  if (got.empty()) return -1;
  if (std::memcmp(got.data(), want.data(), got.size()) == 0) return -1;
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) return static_cast<long>(i / es);
  }
  return -1;
}

std::string label(DataType d, ReduceOp op, size_t count, int n, bool in_place) {
  return std::string(dtype_name(d)) + " " + op_name(op) + " count=" + std::to_string(count) +
         " N=" + std::to_string(n) + (in_place ? " in-place" : "");
}

std::vector<size_t> edge_counts(int n) {
  std::vector<size_t> c = {0, 1, static_cast<size_t>(n + 1), static_cast<size_t>(n), 97, 65537};
  if (n > 1) c.push_back(static_cast<size_t>(n - 1));
  return c;
}

// The dtypes and ops the sweeps take: all of them; or one dtype of each
// width and two ops (a sum, and an average, which finishes with a pass of
// its own) under TSan, and where KOLO_TEST_SWEEP=widths asks (the RDMA
// suite's core run, in an emulated VM). A race is a matter of when memory
// is read and written, and a transport carries bytes, not what a kernel
// computes of them; the optimized and ASan passes sweep every dtype and op.
// The full sweeps were most of the TSan pass's conformance time.
bool narrow_sweep() {
#if defined(__SANITIZE_THREAD__)
  return true;
#else
  const char* sweep = std::getenv("KOLO_TEST_SWEEP");
  return sweep != nullptr && std::string(sweep) == "widths";
#endif
}

std::vector<DataType> swept_dtypes() {
  if (narrow_sweep()) return {DataType::kInt8, DataType::kFloat16, DataType::kFloat32, DataType::kFloat64};
  std::vector<DataType> all;
  for (int d = 0; d < kNumDataTypes; ++d) all.push_back(static_cast<DataType>(d));
  return all;
}

std::vector<ReduceOp> swept_ops() {
  if (narrow_sweep()) return {ReduceOp::kSum, ReduceOp::kAvg};
  std::vector<ReduceOp> all;
  for (int o = 0; o < kNumReduceOps; ++o) all.push_back(static_cast<ReduceOp>(o));
  return all;
}

class Collectives : public ::testing::TestWithParam<WorldParam> {};

void check_allreduce(ThreadWorld& w, DataType d, ReduceOp op, size_t count, bool in_place) {
  const int n = w.size();
  const Bytes want = ref::expected_buffer(d, op, n, count);
  w.run([&](int r) {
    Bytes in = ref::input_buffer(d, op, r, count);
    Bytes out(in.size(), 0xAB);
    Status s = in_place ? w.comm(r).allreduce(in.data(), in.data(), count, d, op)
                        : w.comm(r).allreduce(in.data(), out.data(), count, d, op);
    ASSERT_TRUE(s.is_ok()) << label(d, op, count, n, in_place) << " rank " << r << ": " << s.to_string();
    const Bytes& got = in_place ? in : out;
    long diff = first_difference(got, want, dtype_size(d));
    EXPECT_EQ(diff, -1) << label(d, op, count, n, in_place) << " rank " << r << " differs at element " << diff;
  });
}

// Every dtype x op over the edge counts, out of place, plus one in place.
void sweep_allreduce(ThreadWorld& w) {
  for (DataType d : swept_dtypes()) {
    for (ReduceOp op : swept_ops()) {
      for (size_t count : edge_counts(w.size())) check_allreduce(w, d, op, count, false);
      check_allreduce(w, d, op, 1031, true);
    }
  }
}

TEST_P(Collectives, AllreduceEveryDtypeOpAndEdgeCount) {
  ThreadWorld w = make_world(GetParam(), test_config());  // the ring, for every size
  sweep_allreduce(w);
}

TEST_P(Collectives, RecursiveDoublingAllreduceEveryDtypeOp) {
  ThreadWorld w = make_world(GetParam(), test_config(4096, int64_t{1} << 30));  // small-message algorithm for every size
  sweep_allreduce(w);
}

// KOLO_ALGORITHM=`algorithm` (at every size, on one host as across
// hosts): the edge counts, then buffers of many segments of 4 KiB (a tree's
// pipeline; halving and doubling's pieces and blocks), in place and not.
void sweep_forced_allreduce(const WorldParam& param, const char* algorithm) {
  Config c = test_config(4096);
  c.algorithm = algorithm;
  ThreadWorld w = make_world(param, c);
  if (w.size() > 1) {
    ASSERT_STREQ(w.comm(0).allreduce_algorithm(4), algorithm);
  }
  sweep_allreduce(w);
  for (DataType d : swept_dtypes()) {
    check_allreduce(w, d, ReduceOp::kSum, 40000 + 3, false);
    check_allreduce(w, d, ReduceOp::kAvg, 40000 + 3, true);
  }
}

TEST_P(Collectives, TreeAllreduceEveryDtypeOp) { sweep_forced_allreduce(GetParam(), "tree"); }

// Past a power of two, the ranks beyond it fold in.
TEST_P(Collectives, HalvingDoublingAllreduceEveryDtypeOp) { sweep_forced_allreduce(GetParam(), "halving_doubling"); }

// On one host halving and doubling goes through the buffer in blocks of
// what stays in a core's cache where p segments would be more
// (halving_doubling.h): segments of 1 MiB make p segments of 2 MiB or
// more, and the buffer spans two and a half cache-sized blocks, the last
// one partial.
TEST_P(Collectives, HalvingDoublingOnOneHostRunsInCacheSizedBlocks) {
  Config c = test_config(int64_t{1} << 20);
  c.algorithm = "halving_doubling";
  ThreadWorld w = make_world(GetParam(), c);
  const size_t block = pipeline_cache_bytes(cpu_caches().l2);
  check_allreduce(w, DataType::kFloat32, ReduceOp::kSum, block * 5 / 2 / 4 + 3, true);
  check_allreduce(w, DataType::kInt32, ReduceOp::kAvg, block * 5 / 2 / 4 + 1, false);
}

// A sanitizer checks every byte a kernel touches, so its builds send a
// quarter of the bytes in segments a quarter the size: the same number of
// segments, pipelined the same way, where the races would be; this test
// alone took over half of the TSan pass's time at full size.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr size_t kSeveralMegabytes = 3u << 18;
#else
constexpr size_t kSeveralMegabytes = 3u << 20;
#endif

TEST_P(Collectives, AllreduceSeveralMegabytesEveryDtypeOp) {
  ThreadWorld w = make_world(GetParam(), test_config(static_cast<int64_t>(kSeveralMegabytes / 12)));
  for (DataType d : swept_dtypes()) {
    const size_t count = kSeveralMegabytes / dtype_size(d) + 5;
    for (ReduceOp op : swept_ops()) check_allreduce(w, d, op, count, op == ReduceOp::kSum);
  }
}

TEST_P(Collectives, BackToBackAllreducesKeepTheirResultsApart) {
  // Each rank starts its next call as soon as its last returns, while a
  // slower rank may still be copying results out: what one call leaves in
  // shared buffers must not reach another (the shared-memory allreduce
  // alternates halves of its slots across calls for this).
  const int n = std::get<0>(GetParam());
  ThreadWorld w = make_world(GetParam(), test_config());
  w.run([&](int r) {
    for (int call = 0; call < 200; ++call) {
      const size_t count = 1 + static_cast<size_t>(call * 37 % 5000);
      std::vector<int64_t> in(count), out(count, -1);
      for (size_t i = 0; i < count; ++i) in[i] = int64_t{call} * 1000003 + r * 7 + static_cast<int64_t>(i);
      ASSERT_TRUE(w.comm(r).allreduce(in.data(), out.data(), count, DataType::kInt64,
                                      ReduceOp::kSum).is_ok());
      for (size_t i = 0; i < count; ++i) {
        const int64_t want = n * (int64_t{call} * 1000003 + static_cast<int64_t>(i)) + 7 * int64_t{n} * (n - 1) / 2;
        ASSERT_EQ(out[i], want) << "rank " << r << ", call " << call << ", element " << i;
      }
      if (r == call % n) std::this_thread::yield();  // a different rank lags each call
    }
  });
}

void sweep_reduce_scatter(ThreadWorld& w) {
  const int n = w.size();
  for (DataType dt : swept_dtypes()) {
    for (ReduceOp op : swept_ops()) {
      const size_t es = dtype_size(dt);
      for (size_t recv_count : {size_t{0}, size_t{1}, size_t{7}, size_t{5000}}) {
        for (bool in_place : {false, true}) {
          const Bytes want = ref::expected_buffer(dt, op, n, recv_count * n);
          w.run([&](int r) {
            Bytes in = ref::input_buffer(dt, op, r, recv_count * n);
            Bytes out(recv_count * es, 0xCD);
            Status s = in_place ? w.comm(r).reduce_scatter(in.data(), in.data(), recv_count, dt, op)
                                : w.comm(r).reduce_scatter(in.data(), out.data(), recv_count, dt, op);
            ASSERT_TRUE(s.is_ok()) << s.to_string();
            const unsigned char* got = in_place ? in.data() : out.data();
            if (recv_count == 0) return;
            EXPECT_EQ(std::memcmp(got, want.data() + r * recv_count * es, recv_count * es), 0)
                << label(dt, op, recv_count, n, in_place) << " rank " << r;
          });
        }
      }
    }
  }
}

TEST_P(Collectives, ReduceScatterEveryDtypeOp) {
  ThreadWorld w = make_world(GetParam(), test_config());
  sweep_reduce_scatter(w);
}

void sweep_allgather(ThreadWorld& w) {
  const int n = w.size();
  for (DataType dt : swept_dtypes()) {
    const size_t es = dtype_size(dt);
    for (size_t count : {size_t{0}, size_t{1}, size_t{3}, size_t{97}, size_t{20000}}) {
      // Every rank's block is distinct: rank r contributes input_value(r, i).
      Bytes want;
      for (int r = 0; r < n; ++r) {
        Bytes b = ref::input_buffer(dt, ReduceOp::kSum, r, count);
        want.insert(want.end(), b.begin(), b.end());
      }
      for (int mode = 0; mode < 3; ++mode) {  // 0: separate, 1: send == recv, 2: send == own block
        w.run([&](int r) {
          Bytes mine = ref::input_buffer(dt, ReduceOp::kSum, r, count);
          Bytes out(count * es * n, 0xEF);
          const void* send = mine.data();
          if (mode > 0 && count > 0) {
            std::memcpy(out.data() + r * count * es, mine.data(), count * es);
            send = mode == 1 ? out.data() : out.data() + r * count * es;
          }
          Status s = w.comm(r).allgather(send, out.data(), count, dt);
          ASSERT_TRUE(s.is_ok()) << s.to_string();
          EXPECT_EQ(out, want) << dtype_name(dt) << " count=" << count << " mode=" << mode << " rank " << r;
        });
      }
    }
  }
}

TEST_P(Collectives, AllgatherEveryDtypeInAndOutOfPlace) {
  ThreadWorld w = make_world(GetParam(), test_config());
  sweep_allgather(w);
}

void sweep_broadcast(ThreadWorld& w) {
  const int n = w.size();
  for (DataType d : {DataType::kUint8, DataType::kFloat16,
                DataType::kFloat64}) {
    const DataType dt = static_cast<DataType>(d);
    for (size_t count : {size_t{0}, size_t{1}, size_t{97}, size_t{100000}}) {
      for (int root = 0; root < n; ++root) {
        const Bytes want = ref::input_buffer(dt, ReduceOp::kSum, root, count);
        w.run([&](int r) {
          Bytes buf = r == root ? want : Bytes(want.size(), 0x11);
          Status s = w.comm(r).broadcast(buf.data(), count, d, root);
          ASSERT_TRUE(s.is_ok()) << s.to_string();
          EXPECT_EQ(buf, want) << dtype_name(dt) << " count=" << count << " root=" << root << " rank " << r;
        });
      }
    }
  }
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  ThreadWorld w = make_world(GetParam(), test_config());
  sweep_broadcast(w);
}

TEST_P(Collectives, SharedMemoryArenaForEveryCollective) {
  // KOLO_ALGORITHM=shared_memory: the arena wherever it applies (one host,
  // every peer over shared memory), at every size; elsewhere (over TCP,
  // one rank) what the tables choose.
  Config c = test_config(4096);
  c.algorithm = "shared_memory";
  ThreadWorld w = make_world(GetParam(), c);
  if (w.size() > 1 && std::string(w.comm(0).transport_name()) != "shm") {
    // Where the arena cannot serve, the request falls back to the tables'
    // choice, whose every sweep the other cases here run (over TCP too):
    // one small and one pipelined allreduce show the fallback is right.
    const char* name = nullptr;
    ASSERT_TRUE(w.comm(0).estimate("allreduce", 64, nullptr, &name).is_ok());
    EXPECT_STRNE(name, "shared_memory");
    check_allreduce(w, DataType::kFloat32, ReduceOp::kSum, 64, false);
    check_allreduce(w, DataType::kFloat64, ReduceOp::kMax, 300007, true);
    return;
  }
  if (w.size() > 1) {
    for (const char* collective : {"allreduce", "allgather", "reduce_scatter", "broadcast"}) {
      const char* name = nullptr;
      ASSERT_TRUE(w.comm(0).estimate(collective, 64, nullptr, &name).is_ok());
      ASSERT_STREQ(name, "shared_memory") << collective;
    }
  }
  sweep_allreduce(w);
  sweep_reduce_scatter(w);
  sweep_allgather(w);
  sweep_broadcast(w);
  // Past one chunk (half a slot): blocks of 800 KB, an input of N x 400 KB,
  // four calls of each: a rank writes into its slot through its cache or
  // around it, whichever its calls of that size measured faster
  // (collectives/arena_writes.h), and its first calls take each way.
  const int n = w.size();
  const size_t big = 200000;
  Bytes want;
  for (int q = 0; q < n; ++q) {
    const Bytes b = ref::input_buffer(DataType::kFloat32, ReduceOp::kSum, q, big);
    want.insert(want.end(), b.begin(), b.end());
  }
  const Bytes sums = ref::expected_buffer(DataType::kFloat32, ReduceOp::kSum, n, big / 2 * n);
  for (int call = 0; call < 4; ++call) {
    check_allreduce(w, DataType::kFloat32, ReduceOp::kSum, big, call % 2 == 1);
    w.run([&](int r) {
      Bytes mine = ref::input_buffer(DataType::kFloat32, ReduceOp::kSum, r, big), all(want.size(), 0xEF);
      ASSERT_TRUE(w.comm(r).allgather(mine.data(), all.data(), big, DataType::kFloat32).is_ok());
      EXPECT_TRUE(all == want) << "allgather of 800 KB blocks, call " << call << ", rank " << r;
      Bytes in = ref::input_buffer(DataType::kFloat32, ReduceOp::kSum, r, big / 2 * n), out(big / 2 * 4, 0xEF);
      ASSERT_TRUE(w.comm(r).reduce_scatter(in.data(), out.data(), big / 2, DataType::kFloat32, ReduceOp::kSum).is_ok());
      EXPECT_EQ(std::memcmp(out.data(), sums.data() + r * out.size(), out.size()), 0)
          << "reduce_scatter, call " << call << ", rank " << r;
      Bytes data = r == 0 ? mine : Bytes(mine.size(), 0xEF);
      const Bytes root_data = ref::input_buffer(DataType::kFloat32, ReduceOp::kSum, 0, big);
      ASSERT_TRUE(w.comm(r).broadcast(data.data(), big, DataType::kFloat32, 0).is_ok());
      EXPECT_TRUE(data == root_data) << "broadcast of 800 KB, call " << call << ", rank " << r;
    });
  }
}

// Past a mailbox, where ranks may read each other's memory (threads of one
// process may), the arena's allreduce copies each peer's bytes once,
// straight out of its memory, or goes through the slots: rank 0's calls
// of each size try both, alternating, before they choose
// (single_copy_allreduce.h), so six calls of each case take both ways.
// Cases: uneven shares (a prime count), more than one piece of a slot per
// share, dtypes whose reduction and finalize differ; and a fusion of more
// spans than go by address, which takes the slots on every rank.
TEST_P(Collectives, SharedMemorySingleCopyOrThroughTheSlots) {
  Config c = test_config(4096);
  c.algorithm = "shared_memory";
  ThreadWorld w = make_world(GetParam(), c);
  if (w.size() < 2 || std::string(w.comm(0).transport_name()) != "shm") GTEST_SKIP() << "the arena needs shared memory";
  const std::pair<DataType, ReduceOp> cases[] = {{DataType::kFloat32, ReduceOp::kSum},
                                                 {DataType::kFloat64, ReduceOp::kAvg},
                                                 {DataType::kInt32, ReduceOp::kMax},
                                                 {DataType::kBfloat16, ReduceOp::kSum}};
  for (const auto& [d, op] : cases) {
    for (size_t count : {size_t{70001}, size_t{400003}}) {
      for (int call = 0; call < 6; ++call) check_allreduce(w, d, op, count, call % 2 == 1);
    }
  }
  const int n = w.size();
  const size_t spans = 600, each = 100;
  for (int call = 0; call < 2; ++call) {
    w.run([&](int r) {
      std::vector<int32_t> in(spans * each), out(spans * each, -7);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>((r * 13 + i) % 97);
      std::vector<Span> list;
      for (size_t t = 0; t < spans; ++t) list.push_back({&in[t * each], &out[t * each], each});
      ASSERT_TRUE(w.comm(r).allreduce_spans(list, DataType::kInt32, ReduceOp::kSum).is_ok());
      for (size_t i = 0; i < out.size(); ++i) {
        int64_t want = 0;
        for (int q = 0; q < n; ++q) want += static_cast<int32_t>((q * 13 + i) % 97);
        ASSERT_EQ(out[i], want) << "600 spans, rank " << r << " element " << i;
      }
    });
  }
}

TEST_P(Collectives, HierarchicalThroughEachHostsArena) {
  // KOLO_ALGORITHM=hierarchical on emulated hosts (the _over_hosts run:
  // KOLO_TEST_HOSTS=2): the phases within a host go through the host's
  // shared arena, the phase across hosts along the ring of TCP links.
  Config c = test_config(4096);
  c.algorithm = "hierarchical";
  ThreadWorld w = make_world(GetParam(), c);
  const char* name = nullptr;
  ASSERT_TRUE(w.comm(0).estimate("allreduce", 64, nullptr, &name).is_ok());
  if (std::string(name) != "hierarchical") {
    GTEST_SKIP() << "the ranks are not spread evenly over several hosts (run by collectives_test_over_hosts)";
  }
  for (int r = 0; r < w.size(); ++r) EXPECT_TRUE(w.comm(r).has_host_arena()) << "rank " << r;
  sweep_allreduce(w);
  sweep_reduce_scatter(w);
  sweep_allgather(w);
}

// A result larger than a core's L2 is copied out of the arena through the
// cache or around it (Memory::copy_streaming), whichever measured faster
// (collectives/arena_writes.h): ten calls each of allreduce (in place and
// not), allgather and broadcast of such results, 3 ranks (odd shares). The
// first calls try each way of writing the slots, the next each way of
// writing the results. Not under ThreadSanitizer: 11 s there for stores
// (intrinsics) it does not instrument, and the arena's synchronisation is
// SharedMemoryArena's.
#if !defined(__SANITIZE_THREAD__)
TEST(CollectivesPastTheCache, SharedMemoryArenaResults) {
  const size_t bytes = 2 * ArenaWrites::private_cache_bytes() + 4 * 13;  // not a whole number of chunks or lines
  const size_t count = bytes / 4;
  const int n = 3;
  Config c = test_config(1 << 20);
  c.algorithm = "shared_memory";
  ThreadWorld w(n, c);
  if (std::string(w.comm(0).transport_name()) != "shm") GTEST_SKIP() << "the arena needs shared memory";
  const size_t block = count / n + 1;
  Bytes blocks;
  for (int q = 0; q < n; ++q) {
    const Bytes b = ref::input_buffer(DataType::kFloat32, ReduceOp::kSum, q, block);
    blocks.insert(blocks.end(), b.begin(), b.end());
  }
  const Bytes root_data = ref::input_buffer(DataType::kFloat32, ReduceOp::kSum, 1, count);
  for (int call = 0; call < 10; ++call) {
    check_allreduce(w, DataType::kFloat32, ReduceOp::kSum, count, call % 2 == 1);
    w.run([&](int r) {
      const Bytes mine = ref::input_buffer(DataType::kFloat32, ReduceOp::kSum, r, block);
      Bytes all(blocks.size(), 0xEF);
      ASSERT_TRUE(w.comm(r).allgather(mine.data(), all.data(), block, DataType::kFloat32).is_ok());
      EXPECT_TRUE(all == blocks) << "allgather, call " << call << ", rank " << r;
      Bytes data = r == 1 ? root_data : Bytes(root_data.size(), 0xEF);
      ASSERT_TRUE(w.comm(r).broadcast(data.data(), count, DataType::kFloat32, 1).is_ok());
      EXPECT_TRUE(data == root_data) << "broadcast, call " << call << ", rank " << r;
    });
  }
}
#endif

TEST_P(Collectives, BarrierAndRandomFloatsAgreeBitwise) {
  const int n = std::get<0>(GetParam());
  ThreadWorld w = make_world(GetParam(), test_config(8192));
  w.run([&](int r) { ASSERT_TRUE(w.comm(r).barrier().is_ok()); });
  // Random floats: sums depend on order, so check closeness to a double
  // reference and exact agreement across ranks.
  const size_t count = 100003;
  auto value = [](int r, size_t i) { return static_cast<float>(std::sin(0.001 * i + r) * 1000.0); };
  std::vector<std::vector<float>> results(n);
  w.run([&](int r) {
    std::vector<float> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = value(r, i);
    results[r].resize(count);
    ASSERT_TRUE(w.comm(r).allreduce(in.data(), results[r].data(), count, DataType::kFloat32,
                                    ReduceOp::kSum).is_ok());
  });
  for (size_t i = 0; i < count; i += 997) {
    double want = 0;
    for (int r = 0; r < n; ++r) want += value(r, i);
    EXPECT_NEAR(results[0][i], want, 1e-3 * n * 1000) << i;
  }
  for (int r = 1; r < n; ++r) {
    EXPECT_EQ(std::memcmp(results[r].data(), results[0].data(), count * sizeof(float)), 0) << "rank " << r;
  }
}

// Zero-copy fusion: spans of assorted sizes (empty ones, ones smaller than
// a segment, ones spanning chunks), some in place, with each rank's spans at
// different addresses, give exactly the per-span allreduce results; by the
// algorithm the tables choose, by halving and doubling, whose pieces are
// cut where spans end (a piece of 256 elements, blocks of p of them), and
// by the shared-memory arena, whose copies
// in and out walk the spans together (one span crosses its half-slot
// chunks, 512 KiB) and whose reduction reads a rank's own share from them
// where the rank writes into its slot through the cache. A rank's first
// calls of a size write through the cache, then around it, in turn
// (collectives/arena_writes.h), and where ranks read each other's memory
// the calls go by a single copy and through the slots in turn
// (single_copy_allreduce.h): five calls take kAvg both ways.
TEST_P(Collectives, AllreduceOverSpansEqualsEachSpanReduced) {
  const int n = std::get<0>(GetParam());
  const std::vector<size_t> counts = {0, 1, 700, 3, 0, 5000, 257, 1, 12000, 64, 140001, 2, 0, 1030};
  for (const char* algorithm : {"auto", "halving_doubling", "shared_memory"}) {
    Config c = test_config(1024);
    c.algorithm = algorithm;
    ThreadWorld w = make_world(GetParam(), c);
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax, ReduceOp::kSum, ReduceOp::kAvg}) {
      w.run([&](int r) {
        std::vector<std::vector<int32_t>> in(counts.size()), out(counts.size());
        std::vector<Span> spans;
        for (size_t t = 0; t < counts.size(); ++t) {
          in[t].resize(counts[t] + r);  // different layouts per rank
          for (size_t i = 0; i < counts[t]; ++i) in[t][i] = static_cast<int32_t>((r * 31 + t * 7 + i) % 101) - 50;
          const bool in_place = t % 3 == 0;
          if (!in_place) out[t].assign(counts[t], -7);
          spans.push_back({in[t].data(), in_place ? in[t].data() : out[t].data(), counts[t]});
        }
        ASSERT_TRUE(w.comm(r).allreduce_spans(spans, DataType::kInt32, op).is_ok());
        for (size_t t = 0; t < counts.size(); ++t) {
          const int32_t* got = static_cast<const int32_t*>(spans[t].recv);
          for (size_t i = 0; i < counts[t]; ++i) {
            int64_t sum = 0, mx = INT64_MIN;
            for (int q = 0; q < n; ++q) {
              const int64_t v = static_cast<int32_t>((q * 31 + t * 7 + i) % 101) - 50;
              sum += v;
              mx = std::max(mx, v);
            }
            const int64_t want = op == ReduceOp::kMax ? mx : op == ReduceOp::kAvg ? sum / n : sum;
            ASSERT_EQ(got[i], want) << algorithm << " n=" << n << " op " << op_name(op) << " rank " << r << " span " << t
                                    << " i " << i;
          }
        }
      });
    }
  }
}

// Several buffers in one allreduce where they lie (Communicator::
// allreduce_many, kolo_allreduce_many), blocking and asynchronous: each
// buffer's result is its own allreduce's, whatever the others' sizes.
TEST_P(Collectives, AllreduceManyEqualsEachBufferReduced) {
  ThreadWorld w = make_world(GetParam(), test_config(4096));
  const int n = w.size();
  const std::vector<size_t> counts = {1, 0, 5000, 3, 70001};
  for (bool asynchronous : {false, true}) {
    w.run([&](int r) {
      std::vector<Bytes> in, out;
      std::vector<Span> spans;
      for (size_t count : counts) {
        in.push_back(ref::input_buffer(DataType::kFloat32, ReduceOp::kSum, r, count));
        out.emplace_back(in.back().size(), 0xAB);
      }
      for (size_t i = 0; i < counts.size(); ++i) {
        const bool in_place = i % 2 == 1;
        spans.push_back({in[i].data(), in_place ? in[i].data() : out[i].data(), counts[i]});
      }
      Launch launch;
      auto done = std::make_shared<OpHandle>();
      if (asynchronous) launch.done.push_back(done);
      ASSERT_TRUE(w.comm(r).allreduce_many(spans, DataType::kFloat32, ReduceOp::kSum, std::move(launch)).is_ok());
      if (asynchronous) ASSERT_TRUE(done->wait(Deadline::after_seconds(30)).is_ok());
      for (size_t i = 0; i < counts.size(); ++i) {
        const Bytes& got = i % 2 == 1 ? in[i] : out[i];
        EXPECT_EQ(first_difference(got, ref::expected_buffer(DataType::kFloat32, ReduceOp::kSum, n, counts[i]), 4), -1)
            << "buffer " << i << " rank " << r << (asynchronous ? " (async)" : "");
      }
    });
  }
}

TEST_P(Collectives, SeveralSocketsPerPeer) {
  Config c = test_config(4096);
  c.sockets_per_peer = 3;  // messages striped over three streams per neighbour
  ThreadWorld w = make_world(GetParam(), c);
  for (DataType d : {DataType::kInt32, DataType::kBfloat16}) {
    for (size_t count : {size_t{1}, size_t{97}, size_t{200003}}) {
      check_allreduce(w, static_cast<DataType>(d), ReduceOp::kSum, count, false);
      check_allreduce(w, static_cast<DataType>(d), ReduceOp::kMax, count, true);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, Collectives, worlds_up_to(8), world_name);

}  // namespace
}  // namespace kolo
