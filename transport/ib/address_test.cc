#include "transport/ib/address.h"

#include <gtest/gtest.h>

namespace kolo {
namespace {

IbAddress sample() {
  IbAddress a{};
  a.job_id = 77;
  a.from_rank = 1;
  a.to_rank = 2;
  a.world_size = 4;
  a.qp_num = 0x1234;
  a.psn = 0xabcdef;
  a.port = 1;
  a.mtu = 3;
  a.gid[10] = a.gid[11] = 0xff;
  a.gid[15] = 7;
  a.gid_index = 1;
  return a;
}

const IbExpectation kExpected{77, 2, 1, 4};

TEST(IbAddress, RoundTrips) {
  IbAddress out{};
  ASSERT_TRUE(decode_ib_address(encode_ib_address(sample()), kExpected, &out).is_ok());
  EXPECT_EQ(out.qp_num, 0x1234u);
  EXPECT_EQ(out.psn, 0xabcdefu);
  EXPECT_EQ(out.gid[15], 7);
  EXPECT_EQ(out.gid_index, 1);
  EXPECT_EQ(out.mtu, 3);
}

Status decode_changed(void (*change)(IbAddress*), const IbExpectation& e = kExpected) {
  IbAddress a = sample();
  std::string bytes = encode_ib_address(a);
  IbAddress* raw = reinterpret_cast<IbAddress*>(&bytes[0]);
  change(raw);
  IbAddress out{};
  return decode_ib_address(bytes, e, &out);
}

TEST(IbAddress, RejectsWhatTcpsHandshakeRejects) {
  Status s = decode_changed([](IbAddress* a) { a->magic = 1; });
  EXPECT_EQ(s.code(), Code::kAuth);
  s = decode_changed([](IbAddress* a) { a->job_id = 78; });
  EXPECT_EQ(s.code(), Code::kAuth);
  EXPECT_NE(s.message().find("different job"), std::string::npos);
  s = decode_changed([](IbAddress* a) { a->version = 99; });
  EXPECT_NE(s.message().find("version 99"), std::string::npos);
  s = decode_changed([](IbAddress* a) { a->world_size = 5; });
  EXPECT_EQ(s.code(), Code::kMismatch);
  s = decode_changed([](IbAddress* a) { a->to_rank = 3; });
  EXPECT_NE(s.message().find("from rank 1 to rank 3"), std::string::npos) << s.message();
  s = decode_changed([](IbAddress* a) { a->from_rank = 0; });
  EXPECT_FALSE(s.is_ok());
}

TEST(IbAddress, RejectsImpossibleQueuePairParameters) {
  EXPECT_NE(decode_changed([](IbAddress* a) { a->psn = 1u << 24; }).message().find("PSN"), std::string::npos);
  EXPECT_NE(decode_changed([](IbAddress* a) { a->mtu = 6; }).message().find("MTU"), std::string::npos);
  EXPECT_NE(decode_changed([](IbAddress* a) { a->qp_num = 0; }).message().find("QP number"), std::string::npos);
  IbAddress out{};
  EXPECT_EQ(decode_ib_address("short", kExpected, &out).code(), Code::kInvalidUsage);
}

TEST(IbAddress, BothEndsUseTheSmallerMtu) {
  EXPECT_EQ(common_mtu(5, 3), 3);
  EXPECT_EQ(common_mtu(2, 4), 2);
}

}  // namespace
}  // namespace kolo
