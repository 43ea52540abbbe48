#include "common/crc32c.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kolo {
namespace {

TEST(Crc32c, KnownAnswers) {
  // The standard check value of CRC-32C, and RFC 3720's test vectors.
  EXPECT_EQ(crc32c(0, "123456789", 9), 0xe3069283u);
  std::vector<unsigned char> zeros(32, 0), ones(32, 0xff), inc(32);
  for (int i = 0; i < 32; ++i) inc[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(crc32c(0, zeros.data(), 32), 0x8a9136aau);
  EXPECT_EQ(crc32c(0, ones.data(), 32), 0x62a8ab43u);
  EXPECT_EQ(crc32c(0, inc.data(), 32), 0x46dd794eu);
  EXPECT_EQ(crc32c(0, nullptr, 0), 0u);
}

TEST(Crc32c, ContinuesAcrossPiecesAndSeesOneBitFlips) {
  std::string s(1000, 'k');
  for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<char>(i * 7);
  const uint32_t whole = crc32c(0, s.data(), s.size());
  EXPECT_EQ(crc32c(crc32c(0, s.data(), 333), s.data() + 333, s.size() - 333), whole);
  for (size_t bit = 0; bit < s.size() * 8; bit += 97) {
    std::string t = s;
    t[bit / 8] = static_cast<char>(t[bit / 8] ^ (1 << (bit % 8)));
    EXPECT_NE(crc32c(0, t.data(), t.size()), whole) << bit;
  }
}

}  // namespace
}  // namespace kolo
