#include "runtime/torch_store_protocol.h"

#include <gtest/gtest.h>

namespace kolo {
namespace {

std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s) {
    out += d[c >> 4];
    out += d[c & 15];
  }
  return out;
}

// The bytes torch 2.13's Python client sent (to a recording server) for
// TCPStore(...), set("ab", "xyz") and compare_set("k", "", "v"), its own "/"
// prefix included: VALIDATE with the magic number, a PING of its own (kolo
// sends none), then the requests.
TEST(TorchStoreProtocol, RequestsMatchTorch213Recording) {
  EXPECT_EQ(hex(torch_validate_request()), "00" "cef7853c");
  EXPECT_EQ(hex(torch_set_request("/ab", "xyz")), "01" "0300000000000000" "2f6162" "0300000000000000" "78797a");
  EXPECT_EQ(hex(torch_compare_set_request("/k", "", "v")),
            "02" "0200000000000000" "2f6b" "0000000000000000" "0100000000000000" "76");
}

TEST(TorchStoreProtocol, KeyListRequests) {
  EXPECT_EQ(hex(torch_wait_request({"a", "bc"})),
            "06" "0200000000000000" "0100000000000000" "61" "0200000000000000" "6263");
  EXPECT_EQ(hex(torch_check_request({})), "05" "0000000000000000");
  EXPECT_EQ(hex(torch_add_request("k", -1)), "04" "0100000000000000" "6b" "ffffffffffffffff");
  EXPECT_EQ(hex(torch_get_request("k")), "03" "0100000000000000" "6b");
}

TEST(TorchStoreProtocol, ValueReplyArrivesInPieces) {
  std::string wire = std::string("\x03\0\0\0\0\0\0\0", 8) + "xyzTRAILING";
  TorchReply r;
  bool complete = true;
  size_t needed = 0;
  ASSERT_TRUE(parse_torch_reply(TorchReplyKind::kValue, wire.data(), 5, 100, &complete, &needed, &r).is_ok());
  EXPECT_FALSE(complete);
  EXPECT_EQ(needed, 8u);
  ASSERT_TRUE(parse_torch_reply(TorchReplyKind::kValue, wire.data(), 9, 100, &complete, &needed, &r).is_ok());
  EXPECT_FALSE(complete);
  EXPECT_EQ(needed, 11u);
  ASSERT_TRUE(parse_torch_reply(TorchReplyKind::kValue, wire.data(), wire.size(), 100, &complete, &needed, &r).is_ok());
  EXPECT_TRUE(complete);
  EXPECT_EQ(r.value, "xyz");
  EXPECT_EQ(r.consumed, 11u);
}

TEST(TorchStoreProtocol, OversizedValueAndUnknownFlagsAreErrors) {
  std::string huge("\xff\xff\xff\xff\xff\xff\xff\xff", 8);
  TorchReply r;
  bool complete = false;
  size_t needed = 0;
  EXPECT_FALSE(parse_torch_reply(TorchReplyKind::kValue, huge.data(), huge.size(), 1 << 20, &complete, &needed, &r)
                   .is_ok());
  std::string two("\x02", 1);
  EXPECT_FALSE(parse_torch_reply(TorchReplyKind::kCheck, two.data(), 1, 0, &complete, &needed, &r).is_ok());
  EXPECT_FALSE(parse_torch_reply(TorchReplyKind::kWait, two.data(), 1, 0, &complete, &needed, &r).is_ok());
  std::string one("\x01", 1);
  ASSERT_TRUE(parse_torch_reply(TorchReplyKind::kCheck, one.data(), 1, 0, &complete, &needed, &r).is_ok());
  EXPECT_EQ(r.flag, kTorchCheckNotReady);
  std::string minus("\xfe\xff\xff\xff\xff\xff\xff\xff", 8);
  ASSERT_TRUE(parse_torch_reply(TorchReplyKind::kInt64, minus.data(), 8, 0, &complete, &needed, &r).is_ok());
  EXPECT_EQ(r.number, -2);
}

TEST(TorchStoreProtocol, ReplyKinds) {
  EXPECT_EQ(torch_reply_kind(TorchQuery::kGet), TorchReplyKind::kValue);
  EXPECT_EQ(torch_reply_kind(TorchQuery::kCompareSet), TorchReplyKind::kValue);
  EXPECT_EQ(torch_reply_kind(TorchQuery::kAdd), TorchReplyKind::kInt64);
  EXPECT_EQ(torch_reply_kind(TorchQuery::kCheck), TorchReplyKind::kCheck);
  EXPECT_EQ(torch_reply_kind(TorchQuery::kWait), TorchReplyKind::kWait);
}

}  // namespace
}  // namespace kolo
