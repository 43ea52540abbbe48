// The records of an encrypted connection: keys as RFC 5869 derives them,
// records that open only once, in order, unaltered, with their own key.
#include "common/record_cipher.h"

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace kolo {
namespace {

std::string hex(const uint8_t* p, size_t n) {
  std::string s;
  char b[3];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof(b), "%02x", p[i]);
    s += b;
  }
  return s;
}

TEST(RecordCipher, KeysAreRfc5869Hkdf) {
  // RFC 5869, test case 1: the key is the first 32 bytes of its OKM, the
  // salt the next 4.
  std::string salt;
  for (int i = 0; i <= 0x0c; ++i) salt += static_cast<char>(i);
  std::string info;
  for (int i = 0xf0; i <= 0xf9; ++i) info += static_cast<char>(i);
  SealKey k;
  ASSERT_TRUE(derive_seal_key(std::string(22, '\x0b'), salt, info, &k).is_ok());
  EXPECT_EQ(hex(k.key.data(), 32), "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf");
  EXPECT_EQ(hex(k.salt.data(), 4), "34007208");
  EXPECT_EQ(derive_seal_key("", salt, info, &k).code(), Code::kInvalidArgument);
}

struct Record {
  uint32_t length;
  std::vector<uint8_t> bytes;
  uint8_t tag[kSealTagBytes];
};

Record seal(RecordCipher& c, const std::string& text) {
  Record r;
  r.length = static_cast<uint32_t>(text.size());
  r.bytes.resize(text.size());
  EXPECT_TRUE(c.seal(text.data(), text.size(), &r.length, sizeof(r.length), r.bytes.data(), r.tag).is_ok());
  return r;
}

bool open(RecordCipher& c, const Record& r, std::string* text) {
  text->assign(r.bytes.size(), '\0');
  return c.open(r.bytes.data(), r.bytes.size(), &r.length, sizeof(r.length), r.tag, &(*text)[0]);
}

TEST(RecordCipher, RecordsOpenOnceInOrderUnalteredWithTheirKey) {
  SealKey k, other;
  ASSERT_TRUE(derive_seal_key("job secret", "nonces", "tcp: dialer to acceptor", &k).is_ok());
  ASSERT_TRUE(derive_seal_key("job secret", "nonces", "tcp: acceptor to dialer", &other).is_ok());
  RecordCipher sender(k), receiver(k), wrong(other);
  const Record a = seal(sender, "the gradients of step 1");
  const Record b = seal(sender, "the gradients of step 2");
  const Record empty = seal(sender, "");
  EXPECT_EQ(std::string(a.bytes.begin(), a.bytes.end()).find("gradients"), std::string::npos);
  std::string text;
  EXPECT_FALSE(open(wrong, a, &text)) << "another direction's key";
  EXPECT_FALSE(open(receiver, b, &text)) << "out of order";
  ASSERT_TRUE(open(receiver, a, &text));
  EXPECT_EQ(text, "the gradients of step 1");
  EXPECT_FALSE(open(receiver, a, &text)) << "replayed";
  Record flipped = b;
  flipped.bytes[3] ^= 1;
  EXPECT_FALSE(open(receiver, flipped, &text)) << "a bit flipped";
  Record relabelled = b;
  relabelled.length += 1;
  EXPECT_FALSE(open(receiver, relabelled, &text)) << "its length altered";
  // A look ahead does not move past the record.
  std::string ahead(b.bytes.size(), '\0');
  ASSERT_TRUE(receiver.open_ahead(b.bytes.data(), b.bytes.size(), &b.length, sizeof(b.length), b.tag, &ahead[0]));
  ASSERT_TRUE(open(receiver, b, &text));
  EXPECT_EQ(text, ahead);
  ASSERT_TRUE(open(receiver, empty, &text));
  EXPECT_EQ(text, "");
  EXPECT_EQ(receiver.records(), 3u);
}

TEST(RecordCipher, InPlace) {
  SealKey k;
  ASSERT_TRUE(derive_seal_key("s", "n", "l", &k).is_ok());
  RecordCipher sender(k), receiver(k);
  std::vector<uint8_t> buf(1 << 20);
  for (size_t i = 0; i < buf.size(); ++i) buf[i] = static_cast<uint8_t>(i * 7);
  const std::vector<uint8_t> plain = buf;
  uint8_t tag[kSealTagBytes];
  ASSERT_TRUE(sender.seal(buf.data(), buf.size(), nullptr, 0, buf.data(), tag).is_ok());
  EXPECT_NE(buf, plain);
  ASSERT_TRUE(receiver.open(buf.data(), buf.size(), nullptr, 0, tag, buf.data()));
  EXPECT_EQ(buf, plain);
}

}  // namespace
}  // namespace kolo
