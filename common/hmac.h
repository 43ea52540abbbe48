// SHA-256 and HMAC-SHA256, for authenticating connections with the job
// secret (KOLO_SECRET): OpenSSL's, checked against the FIPS 180-2 and
// RFC 4231 test vectors.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kolo {

using Digest = std::array<uint8_t, 32>;

Digest sha256(const void* data, size_t bytes);
Digest hmac_sha256(const std::string& key, const void* data, size_t bytes);

// Compares in time independent of where the first difference is.
bool digests_equal(const Digest& a, const Digest& b);

// n bytes from the kernel's random source (getrandom).
std::string random_bytes(size_t n);

}  // namespace kolo
