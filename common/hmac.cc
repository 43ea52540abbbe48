#include "common/hmac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>

namespace kolo {

// OpenSSL's: kolo writes no cryptography of its own.
Digest sha256(const void* data, size_t bytes) {
  Digest out{};
  unsigned int length = 0;
  EVP_Digest(data, bytes, out.data(), &length, EVP_sha256(), nullptr);
  return out;
}

Digest hmac_sha256(const std::string& key, const void* data, size_t bytes) {
  Digest out{};
  unsigned int length = 0;
  static const unsigned char kNothing = 0;  // HMAC wants a non-null pointer for an empty message
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       bytes ? static_cast<const unsigned char*>(data) : &kNothing, bytes, out.data(), &length);
  return out;
}

bool digests_equal(const Digest& a, const Digest& b) { return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0; }

std::string random_bytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::getrandom(&out[got], n - got, 0);
    if (r > 0) got += static_cast<size_t>(r);
  }
  return out;
}

}  // namespace kolo
