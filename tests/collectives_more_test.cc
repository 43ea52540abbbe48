// The rooted and "v" collectives (reduce, gather(v), scatter(v),
// allgatherv, reduce_scatterv, alltoall(v)) for worlds of 1 to 8 ranks as
// threads over real TCP loopback, and on split communicators of as many
// (keys reversed, beside a rank without color): every dtype (and op, for
// the reducing ones), counts 0, 1, small, not divisible by N and spanning
// several 4 KiB segments, in place where allowed, roots 0 and N-1, uneven counts with
// zeros and non-packed displacements. Expected values come from
// tests/reference.h (reductions) or from the inputs themselves (data
// movement), compared byte for byte. Then mismatched calls (MISMATCH on
// every rank) and argument errors.
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/reference.h"
#include "tests/thread_world.h"

namespace kolo {
namespace {

using Bytes = std::vector<unsigned char>;
using Counts = std::vector<size_t>;

// Bytes that name their owner and position: rank `from`'s block for rank `to`.
Bytes pattern(int from, int to, size_t bytes) {
  Bytes b(bytes);
  for (size_t i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>(from * 37 + to * 11 + i * 7 + 1);
  return b;
}

std::string what(const char* name, DataType d, size_t count, int n, int root, bool in_place) {
  return std::string(name) + " " + dtype_name(d) + " count=" + std::to_string(count) + " N=" + std::to_string(n) +
         " root=" + std::to_string(root) + (in_place ? " in-place" : "");
}

Counts packed(const Counts& counts) {
  Counts d(counts.size(), 0);
  for (size_t q = 1; q < counts.size(); ++q) d[q] = d[q - 1] + counts[q - 1];
  return d;
}

// Blocks in reverse rank order with a gap of 3 elements before each.
Counts scattered(const Counts& counts, size_t* extent) {
  Counts d(counts.size(), 0);
  size_t at = 0;
  for (size_t q = counts.size(); q-- > 0;) {
    at += 3;
    d[q] = at;
    at += counts[q];
  }
  *extent = at;
  return d;
}

size_t extent_of(const Counts& counts, const Counts& displs) {
  size_t e = 0;
  for (size_t q = 0; q < counts.size(); ++q) e = std::max(e, displs[q] + counts[q]);
  return e;
}

// Uneven per-rank counts with zeros, some larger than a few segments.
Counts uneven(int n, size_t base) {
  Counts c(n);
  for (int q = 0; q < n; ++q) c[q] = q % 3 == 1 ? 0 : base + q * 37;
  return c;
}

// memcmp/memcpy that accept NULL with size 0 (empty vectors' data()).
bool same(const void* a, const void* b, size_t bytes) { return bytes == 0 || std::memcmp(a, b, bytes) == 0; }
void put(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

class More : public ::testing::TestWithParam<WorldParam> {};

void check_reduce(ThreadWorld& w, DataType d, ReduceOp op, size_t count, int root, bool in_place) {
  const int n = w.size();
  const size_t es = dtype_size(d);
  const Bytes want = ref::expected_buffer(d, op, n, count);
  w.run([&](int r) {
    Bytes in = ref::input_buffer(d, op, r, count);
    Bytes out(count * es, 0xAB);
    const bool use_in_place = in_place && r == root;
    void* recv = r == root ? (use_in_place ? in.data() : out.data()) : nullptr;
    Status s = w.comm(r).reduce(in.data(), recv, count, d, op, root);
    ASSERT_TRUE(s.is_ok()) << what("reduce", d, count, n, root, in_place) << " " << op_name(op) << ": "
                           << s.to_string();
    if (r != root || count == 0) return;
    const Bytes& got = use_in_place ? in : out;
    EXPECT_TRUE(same(got.data(), want.data(), count * es))
        << what("reduce", d, count, n, root, in_place) << " " << op_name(op);
  });
}

TEST_P(More, ReduceEveryDtypeOp) {
  const int n = std::get<0>(GetParam());
  ThreadWorld w = make_world(GetParam());
  for (int d = 0; d < kNumDataTypes; ++d) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      const DataType dt = static_cast<DataType>(d);
      const ReduceOp op = static_cast<ReduceOp>(o);
      check_reduce(w, dt, op, 5003, 0, false);            // several segments, not divisible by N
      check_reduce(w, dt, op, static_cast<size_t>(n + 1), n - 1, true);
    }
  }
  check_reduce(w, DataType::kFloat32, ReduceOp::kSum, 0, n - 1, false);
  check_reduce(w, DataType::kInt64, ReduceOp::kAvg, 1, 0, false);
}

// gatherv (and gather, its equal-count case) at roots 0 and N-1.
void check_gather(ThreadWorld& w, DataType d, const Counts& counts, bool scatter_displs, int root, bool in_place,
                  bool equal) {
  const int n = w.size();
  const size_t es = dtype_size(d);
  size_t extent = 0;
  const Counts displs = scatter_displs ? scattered(counts, &extent) : packed(counts);
  if (!scatter_displs) extent = extent_of(counts, displs);
  w.run([&](int r) {
    const Bytes mine = pattern(r, root, counts[r] * es);
    Bytes recv(extent * es + 1, 0xEE);
    Bytes send = mine;
    const void* sendp = send.data();
    if (r == root && in_place) {
      put(recv.data() + displs[r] * es, mine.data(), mine.size());
      sendp = recv.data() + displs[r] * es;
    }
    Status s = equal ? w.comm(r).gatherv(sendp, counts[r], r == root ? recv.data() : nullptr, counts, {},
                                         d, root)
                     : w.comm(r).gatherv(sendp, counts[r], r == root ? recv.data() : nullptr, counts,
                                         r == root ? displs : Counts{}, d, root);
    const std::string label = what("gatherv", d, counts[r], n, root, in_place);
    ASSERT_TRUE(s.is_ok()) << label << ": " << s.to_string();
    if (r != root) return;
    for (int q = 0; q < n; ++q) {
      const Bytes b = pattern(q, root, counts[q] * es);
      EXPECT_TRUE(same(recv.data() + displs[q] * es, b.data(), b.size())) << label << " block " << q;
    }
    EXPECT_EQ(recv.back(), 0xEE) << label << ": wrote past the blocks";
  });
}

void check_scatter(ThreadWorld& w, DataType d, const Counts& counts, bool scatter_displs, int root, bool in_place,
                   bool equal) {
  const int n = w.size();
  const size_t es = dtype_size(d);
  size_t extent = 0;
  const Counts displs = scatter_displs ? scattered(counts, &extent) : packed(counts);
  if (!scatter_displs) extent = extent_of(counts, displs);
  w.run([&](int r) {
    Bytes send(extent * es, 0x11);
    if (r == root) {
      for (int q = 0; q < n; ++q) {
        const Bytes b = pattern(root, q, counts[q] * es);
        if (!b.empty()) std::memcpy(send.data() + displs[q] * es, b.data(), b.size());
      }
    }
    Bytes recv(counts[r] * es + 1, 0xEE);
    void* recvp = (r == root && in_place) ? send.data() + displs[r] * es : recv.data();
    Status s = equal ? w.comm(r).scatterv(r == root ? send.data() : nullptr, counts, {}, recvp, counts[r],
                                          d, root)
                     : w.comm(r).scatterv(r == root ? send.data() : nullptr, counts, r == root ? displs : Counts{},
                                          recvp, counts[r], d, root);
    const std::string label = what("scatterv", d, counts[r], n, root, in_place);
    ASSERT_TRUE(s.is_ok()) << label << ": " << s.to_string();
    const Bytes b = pattern(root, r, counts[r] * es);
    EXPECT_TRUE(same(recvp, b.data(), b.size())) << label;
    if (recvp == recv.data()) {
      EXPECT_EQ(recv.back(), 0xEE) << label << ": wrote past the block";
    }
  });
}

TEST_P(More, GatherAndScatterEveryDtype) {
  const int n = std::get<0>(GetParam());
  ThreadWorld w = make_world(GetParam());
  for (int d = 0; d < kNumDataTypes; ++d) {
    const DataType dt = static_cast<DataType>(d);
    // Equal counts (kolo_gather / kolo_scatter): 0, 1, several segments.
    for (size_t c : {size_t{0}, size_t{1}, size_t{2503}}) {
      for (int root : {0, n - 1}) {
        check_gather(w, dt, Counts(n, c), false, root, root == n - 1, true);
        check_scatter(w, dt, Counts(n, c), false, root, root == n - 1, true);
      }
    }
    // Uneven with zeros, packed and scattered displacements.
    for (bool sd : {false, true}) {
      check_gather(w, dt, uneven(n, 1200), sd, sd ? n - 1 : 0, sd, false);
      check_scatter(w, dt, uneven(n, 1200), sd, sd ? 0 : n - 1, !sd, false);
    }
  }
}

void check_allgatherv(ThreadWorld& w, DataType d, const Counts& counts, bool scatter_displs, bool in_place) {
  const int n = w.size();
  const size_t es = dtype_size(d);
  size_t extent = 0;
  const Counts displs = scatter_displs ? scattered(counts, &extent) : packed(counts);
  if (!scatter_displs) extent = extent_of(counts, displs);
  w.run([&](int r) {
    const Bytes mine = pattern(r, 0, counts[r] * es);
    Bytes recv(extent * es + 1, 0xEE);
    const void* sendp = mine.data();
    if (in_place) {
      if (!mine.empty()) put(recv.data() + displs[r] * es, mine.data(), mine.size());
      sendp = recv.data() + displs[r] * es;
    }
    Status s = w.comm(r).allgatherv(sendp, counts[r], recv.data(), counts, scatter_displs ? displs : Counts{},
                                    d);
    const std::string label = what("allgatherv", d, counts[r], n, 0, in_place);
    ASSERT_TRUE(s.is_ok()) << label << ": " << s.to_string();
    for (int q = 0; q < n; ++q) {
      const Bytes b = pattern(q, 0, counts[q] * es);
      EXPECT_TRUE(same(recv.data() + displs[q] * es, b.data(), b.size())) << label << " block " << q;
    }
    EXPECT_EQ(recv.back(), 0xEE) << label;
  });
}

TEST_P(More, AllgathervEveryDtype) {
  const int n = std::get<0>(GetParam());
  ThreadWorld w = make_world(GetParam());
  for (int d = 0; d < kNumDataTypes; ++d) {
    const DataType dt = static_cast<DataType>(d);
    check_allgatherv(w, dt, Counts(n, 0), false, false);
    check_allgatherv(w, dt, Counts(n, 1), true, false);
    check_allgatherv(w, dt, uneven(n, 1500), false, d % 2 == 0);
    check_allgatherv(w, dt, uneven(n, 1500), true, d % 2 == 1);
  }
}

TEST_P(More, ReduceScattervEveryDtypeOp) {
  const int n = std::get<0>(GetParam());
  ThreadWorld w = make_world(GetParam());
  for (int d = 0; d < kNumDataTypes; ++d) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      const DataType dt = static_cast<DataType>(d);
      const ReduceOp op = static_cast<ReduceOp>(o);
      const size_t es = dtype_size(dt);
      for (const Counts& counts : {Counts(n, 0), uneven(n, 700 + 300 * (o % 2))}) {
        const Counts off = packed(counts);
        const size_t total = off.back() + counts.back();
        const Bytes want = ref::expected_buffer(dt, op, n, total);
        const bool in_place = o == 1;
        w.run([&](int r) {
          Bytes in = ref::input_buffer(dt, op, r, total);
          Bytes out(counts[r] * es + 1, 0xCD);
          // In place as NCCL's: recvbuf is this rank's block of sendbuf.
          void* recv = in_place ? in.data() + off[r] * es : out.data();
          Status s = w.comm(r).reduce_scatterv(in.data(), recv, counts, dt, op);
          const std::string label = what("reduce_scatterv", dt, counts[r], n, 0, in_place) + " " + op_name(op);
          ASSERT_TRUE(s.is_ok()) << label << ": " << s.to_string();
          EXPECT_TRUE(same(recv, want.data() + off[r] * es, counts[r] * es)) << label << " rank " << r;
          if (!in_place) {
            EXPECT_EQ(out.back(), 0xCD) << label;
          }
        });
      }
    }
  }
}

// send_counts[q] on rank r is block(r, q); recv_counts[q] is block(q, r).
void check_alltoallv(ThreadWorld& w, DataType d, const std::function<size_t(int, int)>& block, bool scatter_displs,
                     bool equal) {
  const int n = w.size();
  const size_t es = dtype_size(d);
  w.run([&](int r) {
    Counts sc(n), rc(n);
    for (int q = 0; q < n; ++q) {
      sc[q] = block(r, q);
      rc[q] = block(q, r);
    }
    size_t sext = 0, rext = 0;
    const Counts sd = scatter_displs ? scattered(sc, &sext) : packed(sc);
    const Counts rd = scatter_displs ? scattered(rc, &rext) : packed(rc);
    if (!scatter_displs) {
      sext = extent_of(sc, sd);
      rext = extent_of(rc, rd);
    }
    Bytes send(sext * es, 0x22), recv(rext * es + 1, 0xEE);
    for (int q = 0; q < n; ++q) {
      const Bytes b = pattern(r, q, sc[q] * es);
      if (!b.empty()) std::memcpy(send.data() + sd[q] * es, b.data(), b.size());
    }
    Status s = equal ? w.comm(r).alltoallv(send.data(), sc, {}, recv.data(), rc, {}, d)
                     : w.comm(r).alltoallv(send.data(), sc, scatter_displs ? sd : Counts{}, recv.data(), rc,
                                           scatter_displs ? rd : Counts{}, d);
    const std::string label = what("alltoallv", d, sc[0], n, 0, false);
    ASSERT_TRUE(s.is_ok()) << label << ": " << s.to_string();
    for (int q = 0; q < n; ++q) {
      const Bytes b = pattern(q, r, rc[q] * es);
      EXPECT_TRUE(same(recv.data() + rd[q] * es, b.data(), b.size())) << label << " from " << q;
    }
    EXPECT_EQ(recv.back(), 0xEE) << label;
  });
}

TEST_P(More, AlltoallEveryDtype) {
  ThreadWorld w = make_world(GetParam());
  for (int d = 0; d < kNumDataTypes; ++d) {
    const DataType dt = static_cast<DataType>(d);
    for (size_t c : {size_t{0}, size_t{1}, size_t{2049}}) {
      check_alltoallv(w, dt, [c](int, int) { return c; }, false, true);
    }
    auto uneven_block = [](int from, int to) { return static_cast<size_t>(((from + 2 * to) % 4) * 700); };
    check_alltoallv(w, dt, uneven_block, false, false);
    check_alltoallv(w, dt, uneven_block, true, false);
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, More, worlds_up_to(8), world_name);

// Ranks that disagree about a call all fail with MISMATCH, promptly.
void expect_all_mismatch(int n, const std::function<Status(Communicator&, int)>& call) {
  Config c = test_config();
  c.timeout_s = 30;
  ThreadWorld w(n, c);
  std::vector<Status> got(n);
  const auto start = std::chrono::steady_clock::now();
  w.run([&](int r) { got[r] = call(w.comm(r), r); });
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(took, 10.0);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(got[r].code(), Code::kMismatch) << "rank " << r << ": " << got[r].to_string();
    EXPECT_EQ(w.comm(r).barrier().code(), Code::kMismatch) << "rank " << r << ": sticky";
  }
}

constexpr DataType kF32 = DataType::kFloat32;
constexpr ReduceOp kSum = ReduceOp::kSum;

TEST(MoreMismatch, DifferentRootOrCount) {
  for (int n : {2, 3, 5}) {
    SCOPED_TRACE("N=" + std::to_string(n));
    // Each rank its own buffers (ranks are threads).
    std::vector<std::vector<float>> A(n, std::vector<float>(3000 * n, 1.0f)), B(n, std::vector<float>(3000 * n));
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      return c.reduce(A[r].data(), B[r].data(), 3000, kF32, kSum, r == 0 ? 0 : n - 1);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      return c.reduce(A[r].data(), B[r].data(), r == n - 1 ? 2000 : 3000, kF32, kSum, 0);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      const size_t cnt = r == 0 ? 1000 : 1001;
      return c.gatherv(A[r].data(), cnt, B[r].data(), Counts(n, cnt), {}, kF32, 0);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      return c.gatherv(A[r].data(), 100, B[r].data(), Counts(n, 100), {}, kF32, r == 1 ? 0 : 1);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      return c.scatterv(A[r].data(), Counts(n, 100), {}, B[r].data(), 100, kF32, r == 0 ? n - 1 : 0);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      const size_t cnt = r == n - 1 ? 0 : 10;
      return c.scatterv(A[r].data(), Counts(n, cnt), {}, B[r].data(), cnt, kF32, 0);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      const size_t cnt = r == 0 ? 1500 : 1400;
      return c.allgatherv(A[r].data(), cnt, B[r].data(), Counts(n, cnt), {}, kF32);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      return c.reduce_scatterv(A[r].data(), B[r].data(), Counts(n, r == 0 ? 7 : 9), kF32, kSum);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      const size_t cnt = r == 0 ? 500 : 600;
      return c.alltoallv(A[r].data(), Counts(n, cnt), {}, B[r].data(), Counts(n, cnt), {}, kF32);
    });
    // The same total, split differently: frames of other sizes.
    Counts split_a(n, 100), split_b(n, 100);
    split_a[0] = 150;
    split_a[n - 1] -= 50;
    split_b[0] = 50;
    split_b[n - 1] += 50;
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      const Counts& k = r == 0 ? split_a : split_b;
      return c.gatherv(A[r].data(), k[r], B[r].data(), k, {}, kF32, n - 1);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      const Counts& k = r == n - 1 ? split_a : split_b;
      return c.scatterv(A[r].data(), k, {}, B[r].data(), k[r], kF32, 0);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      return c.reduce_scatterv(A[r].data(), B[r].data(), r == 0 ? split_a : split_b, kF32, kSum);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {
      const Counts& k = r == 0 ? split_a : split_b;
      return c.allgatherv(A[r].data(), k[r], B[r].data(), k, {}, kF32);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {  // a first alltoall against a reduce
      if (r == 0) return c.alltoallv(A[r].data(), Counts(n, 10), {}, B[r].data(), Counts(n, 10), {}, kF32);
      return c.reduce(A[r].data(), B[r].data(), 10, kF32, kSum, 0);
    });
    expect_all_mismatch(n, [&](Communicator& c, int r) {  // one collective against another
      if (r == 0) return c.gatherv(A[r].data(), 100, B[r].data(), Counts(n, 100), {}, kF32, 0);
      return c.scatterv(A[r].data(), Counts(n, 100), {}, B[r].data(), 100, kF32, 0);
    });
  }
}

TEST(MoreArguments, RejectedLocallyNamingTheArgument) {
  ThreadWorld w(2, test_config());
  Communicator& c = w.comm(0);
  std::vector<float> a(64), b(64);
  auto expect_invalid = [](const Status& s, const std::string& names) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find(names), std::string::npos) << s.to_string();
  };
  expect_invalid(c.reduce(a.data(), b.data(), 4, static_cast<DataType>(99), kSum, 0), "dtype");
  expect_invalid(c.reduce(a.data(), b.data(), 4, kF32, static_cast<ReduceOp>(99), 0), "op");
  expect_invalid(c.reduce(a.data(), b.data(), 4, kF32, kSum, 2), "root");
  expect_invalid(c.reduce(nullptr, b.data(), 4, kF32, kSum, 1), "sendbuf");
  expect_invalid(c.reduce(a.data(), nullptr, 4, kF32, kSum, 0), "recvbuf");
  expect_invalid(c.reduce(a.data(), a.data() + 1, 4, kF32, kSum, 0), "overlap");
  expect_invalid(c.gatherv(a.data(), 4, b.data(), Counts{4}, {}, kF32, 0), "recvcounts");
  expect_invalid(c.gatherv(a.data(), 3, b.data(), Counts{4, 4}, {}, kF32, 0), "sendcount");
  expect_invalid(c.gatherv(a.data(), 4, b.data(), Counts{4, 4}, Counts{0, 2}, kF32, 0), "displs");
  expect_invalid(c.gatherv(a.data(), 4, b.data(), Counts{4, 4}, {}, kF32, -1), "root");
  expect_invalid(c.gatherv(b.data() + 1, 4, b.data(), Counts{4, 4}, {}, kF32, 0), "sendbuf overlaps");
  expect_invalid(c.scatterv(nullptr, Counts{4, 4}, {}, b.data(), 4, kF32, 0), "sendbuf");
  expect_invalid(c.scatterv(a.data(), Counts{4, 4}, {}, b.data(), 5, kF32, 0), "recvcount");
  expect_invalid(c.allgatherv(a.data(), 4, nullptr, Counts{4, 4}, {}, kF32), "recvbuf");
  expect_invalid(c.reduce_scatterv(a.data(), nullptr, Counts{4, 4}, kF32, kSum), "recvbuf");
  expect_invalid(c.alltoallv(a.data(), Counts{4, 4}, {}, a.data() + 4, Counts{4, 4}, {}, kF32), "overlap");
  expect_invalid(c.alltoallv(a.data(), Counts{4, 4}, {}, b.data(), Counts{5, 4}, {}, kF32), "sendcounts[0]");
  // Nothing was sent: both ranks still work together.
  w.run([&](int r) {
    std::vector<float> x(4, 1.0f), y(4, 0.0f);
    ASSERT_TRUE(w.comm(r).reduce(x.data(), y.data(), 4, kF32, kSum, 1).is_ok());
    if (r == 1) {
      EXPECT_EQ(y[3], 2.0f);
    }
  });
}

}  // namespace
}  // namespace kolo
