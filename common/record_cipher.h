// Authenticated encryption of the records of one direction of a connection
// (KOLO_ENCRYPT): AES-256-GCM through OpenSSL, with keys derived by
// HKDF-SHA256 from the job's secret and the connection's handshake nonces,
// so every connection and direction has keys of its own. A record's nonce
// is the key's 4-byte salt and the record's number in its direction, never
// sent: a record replayed, dropped, reordered or altered fails to open.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace kolo {

constexpr size_t kSealTagBytes = 16;

struct SealKey {
  std::array<uint8_t, 32> key{};
  std::array<uint8_t, 4> salt{};
};

// HKDF-SHA256: `secret` the job's, `salt` the connection's handshake
// nonces, `label` which connection kind and direction ("tcp: dialer to
// acceptor"). An empty secret is refused: keys derived from it would
// protect nothing.
Status derive_seal_key(const std::string& secret, const std::string& salt, const std::string& label, SealKey* out);

class RecordCipher {
 public:
  explicit RecordCipher(const SealKey& key);
  ~RecordCipher();
  RecordCipher(const RecordCipher&) = delete;
  RecordCipher& operator=(const RecordCipher&) = delete;

  // Encrypts the next record: `bytes` of `in` to `out` (which may be `in`),
  // authenticating `aad` too (the record's length, as sent), and writes
  // its tag.
  Status seal(const void* in, size_t bytes, const void* aad, size_t aad_bytes, void* out,
              uint8_t tag[kSealTagBytes]);
  // Decrypts the next record in the same way; false when it fails to
  // authenticate (tampered, replayed, reordered, or another key), and then
  // the record's number does not advance. `out` holds garbage then.
  bool open(const void* in, size_t bytes, const void* aad, size_t aad_bytes, const uint8_t tag[kSealTagBytes],
            void* out);
  // open() of the next record without moving past it: a look ahead (a
  // peeked header) that the record's real receive opens again.
  bool open_ahead(const void* in, size_t bytes, const void* aad, size_t aad_bytes, const uint8_t tag[kSealTagBytes],
                  void* out);

  uint64_t records() const { return counter_; }

 private:
  bool crypt(bool encrypt, const void* in, size_t bytes, const void* aad, size_t aad_bytes, uint8_t* tag, void* out);

  SealKey key_;
  uint64_t counter_ = 0;
  struct Context;
  std::unique_ptr<Context> context_;
};

}  // namespace kolo
