// The allreduce in every wire format (collectives/wire_format.h) for worlds
// of 1 to 8 ranks as threads, and on split communicators of as many: every
// format x float dtype x sum/average, counts 0, 1, not divisible by N and
// spanning several 4 KiB segments, in place and not, and fused spans.
// Every rank's result must be bitwise the same as every other's, and
// within the format's bound of the exact sum, computed here in double from
// the inputs. Then the error feedback's invariant (the residuals of all
// ranks hold exactly what the result lacks), the communicator's default,
// mismatched formats and refused arguments.
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "collectives/half.h"
#include "tests/thread_world.h"

namespace kolo {
namespace {

using Bytes = std::vector<unsigned char>;

constexpr WireFormat kFormats[] = {WireFormat::kBf16, WireFormat::kFp16, WireFormat::kFp8E4M3, WireFormat::kFp8E5M2,
                                   WireFormat::kInt8};
constexpr DataType kDtypes[] = {DataType::kFloat32, DataType::kFloat16, DataType::kBfloat16};

float load(DataType d, const Bytes& b, size_t i) {
  if (d == DataType::kFloat32) {
    float v;
    std::memcpy(&v, b.data() + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, b.data() + 2 * i, 2);
  return d == DataType::kFloat16 ? fp16_to_float(h) : bf16_to_float(h);
}

void store(DataType d, Bytes* b, size_t i, float v) {
  if (d == DataType::kFloat32) {
    std::memcpy(b->data() + 4 * i, &v, 4);
    return;
  }
  const uint16_t h = d == DataType::kFloat16 ? float_to_fp16(v) : float_to_bf16(v);
  std::memcpy(b->data() + 2 * i, &h, 2);
}

// Rank r's input: normal values of a scale that varies along the buffer
// (1e-3 to 1e2), so blocks differ in magnitude.
Bytes input(DataType d, int r, size_t count) {
  Bytes b(count * dtype_size(d));
  std::mt19937 rng(1000 + r);
  std::normal_distribution<float> g(0, 1);
  for (size_t i = 0; i < count; ++i) {
    const float scale = std::pow(10.0f, static_cast<float>((i / 700) % 6) - 3);
    store(d, &b, i, g(rng) * scale);
  }
  return b;
}

// Half a unit in the last place, relative to the block's largest magnitude
// (or to the value, for the unscaled formats), with some margin.
double format_eps(WireFormat f) {
  switch (f) {
    case WireFormat::kBf16: return std::ldexp(1.0, -8);
    case WireFormat::kFp16: return std::ldexp(1.0, -10);
    case WireFormat::kFp8E4M3: return std::ldexp(1.0, -4) * 1.1;
    case WireFormat::kFp8E5M2: return std::ldexp(1.0, -3) * 1.1;
    case WireFormat::kInt8: return 1.0 / 200;
    case WireFormat::kNative: return 0;
  }
  return 0;
}

double dtype_eps(DataType d) {
  return d == DataType::kFloat32 ? std::ldexp(1.0, -23) : d == DataType::kFloat16 ? std::ldexp(1.0, -10)
                                                                                  : std::ldexp(1.0, -7);
}

std::string what(WireFormat f, DataType d, ReduceOp op, size_t count, int n, bool in_place) {
  return std::string(wire_format_name(f)) + " " + dtype_name(d) + " " + op_name(op) + " count=" +
         std::to_string(count) + " N=" + std::to_string(n) + (in_place ? " in-place" : "");
}

// Checks every rank's result: the same bytes as rank 0's, and each element
// within N encodings' error of the exact sum (each element is encoded once
// per rank on its way round the ring).
void check_results(WireFormat f, DataType d, ReduceOp op, int n, size_t count, const std::vector<Bytes>& in,
                   const std::vector<Bytes>& out, const std::string& label) {
  const size_t bytes = count * dtype_size(d);
  for (int r = 1; r < n; ++r) {
    ASSERT_TRUE(bytes == 0 || std::memcmp(out[r].data(), out[0].data(), bytes) == 0)
        << label << ": rank " << r << "'s result differs from rank 0's";
  }
  // The largest sum of magnitudes: what bounds every partial sum.
  double largest = 0;
  std::vector<double> exact(count), magnitude(count);
  for (size_t i = 0; i < count; ++i) {
    for (int r = 0; r < n; ++r) {
      exact[i] += load(d, in[r], i);
      magnitude[i] += std::fabs(load(d, in[r], i));
    }
    largest = std::max(largest, magnitude[i]);
  }
  const bool unscaled = f == WireFormat::kBf16 || f == WireFormat::kFp16;
  const double divisor = op == ReduceOp::kAvg ? n : 1;
  for (size_t i = 0; i < count; ++i) {
    // fp16 below its normal range (6.1e-5) is absolute: half of 2^-24.
    const double floor = f == WireFormat::kFp16 ? std::ldexp(1.0, -25) : 0;
    const double reach = n > 1 ? n * (format_eps(f) * (unscaled ? magnitude[i] : largest) + floor) : 0;
    const double want = exact[i] / divisor;
    const double bound = reach / divisor + dtype_eps(d) * (std::fabs(want) + reach / divisor) + 1e-30;
    const double got = load(d, out[0], i);
    ASSERT_LE(std::fabs(got - want), bound) << label << " element " << i << ": got " << got << ", exact " << want;
  }
}

class Wire : public ::testing::TestWithParam<WorldParam> {};

TEST_P(Wire, EveryFormatDtypeAndOpIsBitIdenticalAndWithinItsBound) {
  ThreadWorld w = make_world(GetParam());
  const int n = w.size();
  for (WireFormat f : kFormats) {
    for (DataType d : kDtypes) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{9000}}) {
          for (bool in_place : {false, true}) {
            const std::string label = what(f, d, op, count, n, in_place);
            std::vector<Bytes> in(n), out(n);
            w.run([&](int r) {
              in[r] = input(d, r, count);
              Bytes buf = in[r];
              out[r].assign(count * dtype_size(d), 0xAB);
              void* recv = in_place ? buf.data() : out[r].data();
              Status s = w.comm(r).allreduce(buf.data(), recv, count, d, op, f, nullptr);
              ASSERT_TRUE(s.is_ok()) << label << ": " << s.to_string();
              if (in_place) out[r] = buf;
            });
            check_results(f, d, op, n, count, in, out, label);
          }
        }
      }
    }
  }
}

// Fused spans (as the engine passes them), some empty, with error feedback:
// after the call, the residuals of all ranks plus the result (times N for
// an average) give back the exact sum of the inputs, to float rounding.
void check_feedback_over_spans(ThreadWorld& w) {
  const int n = w.size();
  const std::vector<size_t> counts = {700, 0, 3000, 1, 2500};
  for (WireFormat f : kFormats) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
      std::vector<std::vector<Bytes>> in(n), out(n);
      std::vector<std::vector<std::vector<float>>> residual(n);
      for (int round = 0; round < 2; ++round) {
        w.run([&](int r) {
          std::vector<Span> spans;
          std::vector<float*> res;
          if (round == 0) {
            residual[r].assign(counts.size(), {});
            for (size_t s = 0; s < counts.size(); ++s) residual[r][s].assign(counts[s], 0.0f);
          }
          in[r].clear();
          out[r].clear();
          for (size_t s = 0; s < counts.size(); ++s) {
            in[r].push_back(input(DataType::kFloat32, r * 10 + static_cast<int>(s) + round * 100, counts[s]));
            out[r].push_back(Bytes(counts[s] * 4));
          }
          for (size_t s = 0; s < counts.size(); ++s) {
            spans.push_back({in[r][s].data(), out[r][s].data(), counts[s]});
            res.push_back(residual[r][s].data());
          }
          // The residual carried in from the last round is part of this
          // round's contribution.
          std::vector<std::vector<float>> carried = residual[r];
          Status s = w.comm(r).allreduce_spans(spans, DataType::kFloat32, op, f, &res);
          ASSERT_TRUE(s.is_ok()) << wire_format_name(f) << ": " << s.to_string();
          for (size_t k = 0; k < counts.size(); ++k) {
            for (size_t i = 0; i < counts[k]; ++i) store(DataType::kFloat32, &in[r][k], i, load(DataType::kFloat32, in[r][k], i) + carried[k][i]);
          }
        });
        for (size_t s = 0; s < counts.size(); ++s) {
          for (size_t i = 0; i < counts[s]; ++i) {
            double exact = 0, lost = 0, magnitude = 0;
            for (int r = 0; r < n; ++r) {
              exact += load(DataType::kFloat32, in[r][s], i);
              magnitude += std::fabs(load(DataType::kFloat32, in[r][s], i));
              lost += residual[r][s][i];
            }
            const double result = load(DataType::kFloat32, out[0][s], i) * (op == ReduceOp::kAvg ? n : 1);
            for (int r = 1; r < n; ++r) {
              ASSERT_EQ(load(DataType::kFloat32, out[r][s], i), load(DataType::kFloat32, out[0][s], i));
            }
            ASSERT_NEAR(result + lost, exact, 1e-5 * (magnitude + 1e-3) * n)
                << wire_format_name(f) << " " << op_name(op) << " round " << round << " span " << s << " element "
                << i;
          }
        }
      }
    }
  }
}

TEST_P(Wire, FusedSpansWithErrorFeedbackKeepWhatTheResultLacks) {
  ThreadWorld w = make_world(GetParam());
  check_feedback_over_spans(w);
}

INSTANTIATE_TEST_SUITE_P(Worlds, Wire, worlds_up_to(8), world_name);

// The hierarchical schedule (forced, ranks on emulated hosts: 2 x 2, 2 x 3,
// 3 x 2) carries a format on the links between hosts only. Every format,
// dtype and op is bitwise alike on every rank and within its bound; the
// sums within a host are exact, which a flat compressed ring's are not:
// on each host, +-4096 (whose bf16 neighbours are 32 apart) plus small
// values sum to exactly the small ones; and the fused spans' error
// feedback, whose slices per rank cut across spans, keeps its invariant.
TEST(WireHierarchical, FormatsCrossHostsOnlyAndEveryRankAgrees) {
  for (const auto& [hosts, per_host] : {std::pair{2, 2}, std::pair{2, 3}, std::pair{3, 2}}) {
    const int n = hosts * per_host;
    ThreadWorld w(n, [&, per_host = per_host](int r) {
      Config c = test_config();
      c.algorithm = "hierarchical";
      c.host_name = "wire-host-" + std::to_string(r / per_host);  // KOLO_TEST_HOSTS, where set, places them
      return c;
    });
    ASSERT_STREQ(w.comm(0).allreduce_algorithm(1 << 20), "hierarchical");
    for (WireFormat f : kFormats) {
      for (DataType d : kDtypes) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
          for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{9000}}) {
            const std::string label = what(f, d, op, count, n, true) + " hierarchical";
            std::vector<Bytes> in(n), out(n);
            w.run([&](int r) {
              in[r] = input(d, r, count);
              out[r] = in[r];
              Status s = w.comm(r).allreduce(out[r].data(), out[r].data(), count, d, op, f, nullptr);
              ASSERT_TRUE(s.is_ok()) << label << ": " << s.to_string();
            });
            check_results(f, d, op, n, count, in, out, label);
          }
        }
      }
    }
    // Exact within hosts: each host's first two ranks hold +-4096, and
    // every rank a small value of bf16's (the host's index / 8, or 1/4).
    const size_t count = 2000;
    std::vector<Bytes> out(n);
    std::vector<float> small(n);
    w.run([&](int r) {
      const Communicator& c = w.comm(r);
      const int host = (r - c.local_rank()) / c.local_size();
      small[r] = c.local_rank() == 0 ? static_cast<float>(host + 1) / 8 : 0.25f;
      const float big = c.local_rank() == 0 ? 4096.0f : (c.local_rank() == 1 ? -4096.0f : 0.0f);
      std::vector<float> v(count, big + small[r]);
      Status s = w.comm(r).allreduce(v.data(), v.data(), count, DataType::kFloat32, ReduceOp::kSum,
                                     WireFormat::kBf16, nullptr);
      ASSERT_TRUE(s.is_ok()) << s.to_string();
      out[r].assign(reinterpret_cast<unsigned char*>(v.data()), reinterpret_cast<unsigned char*>(v.data() + count));
    });
    float want = 0;
    for (float x : small) want += x;
    for (int r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(load(DataType::kFloat32, out[r], i), want) << "rank " << r << " element " << i << ", " << hosts
                                                              << " hosts of " << per_host;
      }
    }
    check_feedback_over_spans(w);
  }
}

// The single-buffer call with the caller's residuals (kolo_allreduce_wire's
// path): the residuals of all ranks plus the result give back the exact
// sum of what the ranks contributed.
TEST(WireResiduals, CallersBufferKeepsWhatTheResultLacks) {
  const int n = 4;
  ThreadWorld w(n, test_config());
  const size_t count = 3000;
  std::vector<std::vector<float>> residual(n, std::vector<float>(count, 0.0f));
  for (int step = 0; step < 2; ++step) {
    std::vector<Bytes> in(n), out(n);
    std::vector<std::vector<float>> contributed(n);
    w.run([&](int r) {
      in[r] = input(DataType::kFloat32, r + 10 * step, count);
      out[r].assign(count * 4, 0);
      contributed[r].resize(count);
      for (size_t i = 0; i < count; ++i) contributed[r][i] = load(DataType::kFloat32, in[r], i) + residual[r][i];
      Status s = w.comm(r).allreduce(in[r].data(), out[r].data(), count, DataType::kFloat32, ReduceOp::kSum,
                                     WireFormat::kFp8E4M3, residual[r].data());
      ASSERT_TRUE(s.is_ok()) << s.to_string();
    });
    for (size_t i = 0; i < count; ++i) {
      double exact = 0, lost = 0, magnitude = 0;
      for (int r = 0; r < n; ++r) {
        exact += contributed[r][i];
        magnitude += std::fabs(contributed[r][i]);
        lost += residual[r][i];
      }
      ASSERT_NEAR(load(DataType::kFloat32, out[0], i) + lost, exact, 1e-5 * (magnitude + 1e-3) * n)
          << "step " << step << " element " << i;
    }
  }
}

// The communicator's default applies to float sums and averages above the
// small-message limit, and leaves every other allreduce exact; an
// allreduce of several buffers (allreduce_many) as an allreduce.
TEST(WireDefault, AppliesWhereItCan) {
  Config c = test_config();
  c.wire_format = "int8";
  ThreadWorld w(3, c);
  const size_t count = 5000;
  std::vector<Bytes> in(3), out(3);
  w.run([&](int r) {
    in[r] = input(DataType::kFloat32, r, count);
    out[r].assign(count * 4, 0);
    ASSERT_TRUE(w.comm(r).allreduce(in[r].data(), out[r].data(), count, DataType::kFloat32, ReduceOp::kSum).is_ok());
    Bytes many(count * 4, 0);
    ASSERT_TRUE(w.comm(r)
                    .allreduce_many({Span{in[r].data(), many.data(), count}}, DataType::kFloat32, ReduceOp::kSum)
                    .is_ok());
    EXPECT_TRUE(many == out[r]) << "allreduce_many and allreduce differ on rank " << r;
    // An integer sum stays exact.
    std::vector<int32_t> ints(count, r + 1), sum(count);
    ASSERT_TRUE(w.comm(r).allreduce(ints.data(), sum.data(), count, DataType::kInt32, ReduceOp::kSum).is_ok());
    for (int32_t v : sum) ASSERT_EQ(v, 6);
  });
  check_results(WireFormat::kInt8, DataType::kFloat32, ReduceOp::kSum, 3, count, in, out, "default int8");
  // Not the exact sum: the format did apply.
  double exact0 = 0;
  for (int r = 0; r < 3; ++r) exact0 += load(DataType::kFloat32, in[r], 0);
  bool any_inexact = false;
  for (size_t i = 0; i < count; ++i) {
    double e = 0;
    for (int r = 0; r < 3; ++r) e += load(DataType::kFloat32, in[r], i);
    any_inexact = any_inexact || std::fabs(load(DataType::kFloat32, out[0], i) - e) > 1e-4 * std::fabs(e);
  }
  EXPECT_TRUE(any_inexact);
}

TEST(WireArguments, MismatchedFormatsFailEveryRank) {
  Config c = test_config();
  c.timeout_s = 30;
  ThreadWorld w(3, c);
  std::vector<Status> got(3);
  w.run([&](int r) {
    std::vector<float> v(1000, 1.0f);
    got[r] = w.comm(r).allreduce(v.data(), v.data(), v.size(), DataType::kFloat32, ReduceOp::kSum,
                                 r == 0 ? WireFormat::kBf16 : WireFormat::kNative, nullptr);
  });
  for (int r = 0; r < 3; ++r) EXPECT_EQ(got[r].code(), Code::kMismatch) << "rank " << r << ": " << got[r].to_string();
}

TEST(WireArguments, RefusedLocallyNamingWhatWasWrong) {
  ThreadWorld w(1, test_config());
  std::vector<int32_t> ints(10);
  Status s = w.comm(0).allreduce(ints.data(), ints.data(), 10, DataType::kInt32, ReduceOp::kSum, WireFormat::kBf16, nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("wire format bf16 carries float32, float16 and bfloat16 sums and averages, not int32 sum"),
            std::string::npos)
      << s.to_string();
  std::vector<float> v(10);
  s = w.comm(0).allreduce(v.data(), v.data(), 10, DataType::kFloat32, ReduceOp::kMax, WireFormat::kInt8, nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("not float32 max"), std::string::npos) << s.to_string();
  s = w.comm(0).allreduce(v.data(), v.data(), 10, DataType::kFloat32, ReduceOp::kSum, static_cast<WireFormat>(9), nullptr);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  // The communicator is unaffected.
  EXPECT_TRUE(w.comm(0).allreduce(v.data(), v.data(), 10, DataType::kFloat32, ReduceOp::kSum, WireFormat::kInt8, nullptr).is_ok());
}

}  // namespace
}  // namespace kolo
