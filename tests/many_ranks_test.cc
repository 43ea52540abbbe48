// 16, 32 and 64 ranks on one machine, as threads of one process over what
// a machine's ranks get by default (shared memory, the arena; oversubscribed
// on a small machine: correctness and start-up, not speed). The
// conformance suite's allreduce, allgather and alltoall checks at scales
// past its 8 ranks, byte for byte against tests/reference.h. Each world
// prints how long it took to start.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/reference.h"
#include "tests/thread_world.h"

namespace kolo {
namespace {

using Bytes = std::vector<unsigned char>;

class ManyRanks : public ::testing::TestWithParam<int> {};

void check_allreduce(ThreadWorld& w, DataType d, ReduceOp op, size_t count) {
  const int n = w.size();
  const Bytes want = ref::expected_buffer(d, op, n, count);
  w.run([&](int r) {
    Bytes in = ref::input_buffer(d, op, r, count), out(in.size(), 0xAB);
    Status s = w.comm(r).allreduce(in.data(), out.data(), count, d, op);
    ASSERT_TRUE(s.is_ok()) << dtype_name(d) << " " << op_name(op) << " count " << count << " rank " << r << ": "
                           << s.to_string();
    EXPECT_TRUE(out == want) << dtype_name(d) << " " << op_name(op) << " count " << count << " N=" << n << " rank "
                             << r;
  });
}

TEST_P(ManyRanks, AllreduceAllgatherAndAlltoallAgreeWithTheReference) {
  const int n = GetParam();
  const auto start = std::chrono::steady_clock::now();
  ThreadWorld w(n, test_config(64 << 10, 64 << 10));  // the default small-message threshold
  const double started_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d ranks started in %.2f s over %s\n", n, started_s, w.comm(0).transport_name());

  // Allreduce: below and above the latency-bound sizes, exact in every
  // listed dtype at this many ranks (products of 64 factors would not be).
  for (size_t count : {size_t{1}, size_t(n) + 1, size_t{65537}}) {
    check_allreduce(w, DataType::kFloat32, ReduceOp::kSum, count);
    check_allreduce(w, DataType::kInt32, ReduceOp::kMax, count);
    check_allreduce(w, DataType::kFloat64, ReduceOp::kAvg, count);
  }
  check_allreduce(w, DataType::kInt64, ReduceOp::kMin, 1031);

  // Allgather: rank q's block holds q's input, every element checked.
  for (size_t count : {size_t{1}, size_t{1001}}) {
    std::vector<Bytes> inputs;
    for (int q = 0; q < n; ++q) inputs.push_back(ref::input_buffer(DataType::kInt32, ReduceOp::kSum, q, count));
    w.run([&](int r) {
      Bytes all(count * 4 * n, 0xCD);
      Status s = w.comm(r).allgather(inputs[r].data(), all.data(), count, DataType::kInt32);
      ASSERT_TRUE(s.is_ok()) << "allgather rank " << r << ": " << s.to_string();
      for (int q = 0; q < n; ++q) {
        EXPECT_EQ(std::memcmp(all.data() + q * count * 4, inputs[q].data(), count * 4), 0)
            << "allgather count " << count << " N=" << n << ": rank " << r << " has a wrong block " << q;
      }
    });
  }

  // Alltoall: rank r's block for q holds (r, q, i), every element checked.
  const size_t block = 257;
  const auto value = [](int from, int to, size_t i) { return int32_t(from * 1000003 + to * 1009 + int(i)); };
  w.run([&](int r) {
    std::vector<int32_t> send(block * n), recv(block * n, -1);
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < block; ++i) send[q * block + i] = value(r, q, i);
    }
    const std::vector<size_t> counts(n, block);
    Status s = w.comm(r).alltoallv(send.data(), counts, {}, recv.data(), counts, {}, DataType::kInt32);
    ASSERT_TRUE(s.is_ok()) << "alltoall rank " << r << ": " << s.to_string();
    for (int q = 0; q < n; ++q) {
      for (size_t i = 0; i < block; ++i) {
        ASSERT_EQ(recv[q * block + i], value(q, r, i)) << "alltoall N=" << n << ": rank " << r << " from " << q;
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Worlds, ManyRanks, ::testing::Values(16, 32, 64),
                         [](const ::testing::TestParamInfo<int>& info) { return "N" + std::to_string(info.param); });

}  // namespace
}  // namespace kolo
