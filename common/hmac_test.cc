#include "common/hmac.h"

#include <cstdio>
#include <string>

#include <gtest/gtest.h>

namespace kolo {
namespace {

std::string hex(const Digest& d) {
  std::string s;
  char b[3];
  for (uint8_t x : d) {
    std::snprintf(b, sizeof(b), "%02x", x);
    s += b;
  }
  return s;
}

TEST(Sha256, Fips180Vectors) {
  EXPECT_EQ(hex(sha256("abc", 3)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex(sha256("", 0)), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(hex(sha256(two_blocks.data(), two_blocks.size())),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  EXPECT_EQ(hex(sha256(million.data(), million.size())),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(HmacSha256, Rfc4231Vectors) {
  // Test case 1.
  EXPECT_EQ(hex(hmac_sha256(std::string(20, '\x0b'), "Hi There", 8)),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // Test case 2.
  const std::string what = "what do ya want for nothing?";
  EXPECT_EQ(hex(hmac_sha256("Jefe", what.data(), what.size())),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 6: a key longer than the block is hashed first.
  const std::string big = "Test Using Larger Than Block-Size Key - Hash Key First";
  EXPECT_EQ(hex(hmac_sha256(std::string(131, '\xaa'), big.data(), big.size())),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(Digests, CompareAndRandomness) {
  Digest a = sha256("x", 1), b = a;
  EXPECT_TRUE(digests_equal(a, b));
  b[31] ^= 1;
  EXPECT_FALSE(digests_equal(a, b));
  EXPECT_EQ(random_bytes(16).size(), 16u);
  EXPECT_NE(random_bytes(16), random_bytes(16));
}

}  // namespace
}  // namespace kolo
