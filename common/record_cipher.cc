#include "common/record_cipher.h"

#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <cstring>

namespace kolo {

struct RecordCipher::Context {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int keyed_for = -1;  // 1: encrypting, 0: decrypting, -1: no key yet (the key schedule is made once)
  ~Context() { EVP_CIPHER_CTX_free(ctx); }
};

Status derive_seal_key(const std::string& secret, const std::string& salt, const std::string& label, SealKey* out) {
  if (secret.empty()) {
    return invalid_argument("KOLO_ENCRYPT=1 needs the job's secret (KOLO_SECRET; kolorun and kolo_get_unique_id make "
                            "one): the keys are derived from it");
  }
  EVP_PKEY_CTX* ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  uint8_t material[36];
  size_t length = sizeof(material);
  const bool ok = ctx && EVP_PKEY_derive_init(ctx) > 0 && EVP_PKEY_CTX_set_hkdf_md(ctx, EVP_sha256()) > 0 &&
                  EVP_PKEY_CTX_set1_hkdf_salt(ctx, reinterpret_cast<const unsigned char*>(salt.data()),
                                              static_cast<int>(salt.size())) > 0 &&
                  EVP_PKEY_CTX_set1_hkdf_key(ctx, reinterpret_cast<const unsigned char*>(secret.data()),
                                             static_cast<int>(secret.size())) > 0 &&
                  EVP_PKEY_CTX_add1_hkdf_info(ctx, reinterpret_cast<const unsigned char*>(label.data()),
                                              static_cast<int>(label.size())) > 0 &&
                  EVP_PKEY_derive(ctx, material, &length) > 0 && length == sizeof(material);
  EVP_PKEY_CTX_free(ctx);
  if (!ok) return internal_error("deriving the connection's keys failed (OpenSSL's HKDF)");
  std::memcpy(out->key.data(), material, 32);
  std::memcpy(out->salt.data(), material + 32, 4);
  return Status::ok();
}

RecordCipher::RecordCipher(const SealKey& key) : key_(key), context_(new Context()) {}

RecordCipher::~RecordCipher() = default;

bool RecordCipher::crypt(bool encrypt, const void* in, size_t bytes, const void* aad, size_t aad_bytes, uint8_t* tag,
                         void* out) {
  // 2^64 records cannot happen; wrapping would reuse a nonce, so refuse.
  if (counter_ == UINT64_MAX || bytes > static_cast<size_t>(INT32_MAX)) return false;
  uint8_t nonce[12];
  std::memcpy(nonce, key_.salt.data(), 4);
  for (int i = 0; i < 8; ++i) nonce[4 + i] = static_cast<uint8_t>(counter_ >> (56 - 8 * i));
  EVP_CIPHER_CTX* c = context_->ctx;
  // The key once per direction of use; each record then sets only its nonce.
  const uint8_t* key = nullptr;
  const EVP_CIPHER* cipher = nullptr;
  if (context_->keyed_for != static_cast<int>(encrypt)) {
    key = key_.key.data();
    cipher = EVP_aes_256_gcm();
    context_->keyed_for = static_cast<int>(encrypt);
  }
  int n = 0;
  const auto* from = static_cast<const unsigned char*>(in);
  auto* to = static_cast<unsigned char*>(out);
  if (encrypt) {
    return EVP_EncryptInit_ex(c, cipher, nullptr, key, nonce) > 0 &&
           EVP_EncryptUpdate(c, nullptr, &n, static_cast<const unsigned char*>(aad), static_cast<int>(aad_bytes)) > 0 &&
           (bytes == 0 || EVP_EncryptUpdate(c, to, &n, from, static_cast<int>(bytes)) > 0) &&
           EVP_EncryptFinal_ex(c, to + bytes, &n) > 0 &&
           EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, kSealTagBytes, tag) > 0;
  }
  return EVP_DecryptInit_ex(c, cipher, nullptr, key, nonce) > 0 &&
         EVP_DecryptUpdate(c, nullptr, &n, static_cast<const unsigned char*>(aad), static_cast<int>(aad_bytes)) > 0 &&
         (bytes == 0 || EVP_DecryptUpdate(c, to, &n, from, static_cast<int>(bytes)) > 0) &&
         EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, kSealTagBytes, tag) > 0 &&
         EVP_DecryptFinal_ex(c, to + bytes, &n) > 0;
}

Status RecordCipher::seal(const void* in, size_t bytes, const void* aad, size_t aad_bytes, void* out,
                          uint8_t tag[kSealTagBytes]) {
  if (!crypt(true, in, bytes, aad, aad_bytes, tag, out)) {
    return internal_error("encrypting record " + std::to_string(counter_) + " failed (OpenSSL's AES-256-GCM)");
  }
  ++counter_;
  return Status::ok();
}

bool RecordCipher::open(const void* in, size_t bytes, const void* aad, size_t aad_bytes,
                        const uint8_t tag[kSealTagBytes], void* out) {
  if (!open_ahead(in, bytes, aad, aad_bytes, tag, out)) return false;
  ++counter_;
  return true;
}

bool RecordCipher::open_ahead(const void* in, size_t bytes, const void* aad, size_t aad_bytes,
                              const uint8_t tag[kSealTagBytes], void* out) {
  uint8_t expected[kSealTagBytes];
  std::memcpy(expected, tag, kSealTagBytes);  // OpenSSL takes a mutable pointer
  return crypt(false, in, bytes, aad, aad_bytes, expected, out);
}

}  // namespace kolo
