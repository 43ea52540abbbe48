// Wire format of the rendezvous store. Every message is a 4-byte length
// followed by that many bytes; inside, integers are little-endian and strings
// are a 4-byte length and their bytes. The parser checks every length against
// what is left of the message, and the message length against a fixed cap,
// so nothing read from the wire decides how much memory is allocated beyond
// that cap.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/record_cipher.h"
#include "common/status.h"

namespace kolo {

constexpr uint32_t kStoreMagic = 0x4b4f4c53;  // "KOLS"
constexpr uint32_t kStoreMaxMessage = 16u << 20;

enum class StoreOp : uint8_t { kHello = 1, kSet = 2, kGet = 3, kSetIfAbsent = 4 };
// kOtherJob answers a hello that knows the secret but names another job:
// the port still serves an earlier run of the job (a process that shut
// down and initializes again), so the client retries until its deadline.
enum class StoreReply : uint8_t { kOk = 0, kTimeout = 1, kRejected = 2, kOtherJob = 3 };

// The store's handshake mirrors the peers' (transport/handshake.h): the
// server opens with a random nonce; the client's hello carries its own nonce
// and an HMAC over both, its job, its rank and whether it seals, keyed with
// KOLO_SECRET; the server's OK carries an HMAC over both nonces.
std::string store_hello_mac(const std::string& secret, const std::string& server_nonce, uint64_t job,
                            uint32_t rank, const std::string& client_nonce, uint8_t sealed);
std::string store_ack_mac(const std::string& secret, const std::string& server_nonce,
                          const std::string& client_nonce);
// Compares two MACs in time independent of their contents; false unless
// both are whole SHA-256 digests.
bool store_macs_equal(const std::string& a, const std::string& b);

// A client request, parsed from one message body. Every field is checked
// against the bytes actually present; nothing is sized from the wire beyond
// the message itself.
struct StoreRequest {
  StoreOp op{};
  // kHello
  uint32_t magic = 0;
  uint64_t job = 0;
  uint32_t rank = 0;
  uint8_t sealed = 0;  // the client seals its messages after the handshake (KOLO_ENCRYPT)
  std::string nonce, mac;
  // kSet, kSetIfAbsent
  std::string key, value;
  // kGet
  uint32_t timeout_ms = 0;
  std::vector<std::string> keys;
};

// Parses a message body; an error names what was malformed.
Status parse_store_request(const std::string& body, StoreRequest* out);

// A job with KOLO_ENCRYPT=1 seals every store message after the handshake:
// its body becomes [ciphertext][16-byte tag] (AES-256-GCM,
// common/record_cipher.h), under keys derived from the job's secret and
// both nonces, one per direction, with the message's length as AAD. A
// message altered, replayed or reordered fails to open, and the
// connection ends.
class StoreSeal {
 public:
  static Status create(const std::string& secret, const std::string& server_nonce, const std::string& client_nonce,
                       bool server_side, std::unique_ptr<StoreSeal>* out);
  // A whole message (length and body) sealed.
  std::string seal(const std::string& message);
  // A sealed body as read after its `length`, opened in place; false when
  // it fails to authenticate.
  bool open(const unsigned char length[4], std::string* body);

 private:
  StoreSeal(const SealKey& send, const SealKey& recv) : send_(send), recv_(recv) {}
  RecordCipher send_, recv_;
};

class MessageWriter {
 public:
  void u8(uint8_t v) { bytes_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v);
  void u64(uint64_t v);
  void str(const std::string& s);
  // The message with its length prefix.
  std::string finish() const;

 private:
  std::string bytes_;
};

class MessageReader {
 public:
  MessageReader(const char* data, size_t size) : p_(data), left_(size) {}
  bool u8(uint8_t* v);
  bool u32(uint32_t* v);
  bool u64(uint64_t* v);
  bool str(std::string* s);
  bool done() const { return left_ == 0; }

 private:
  const char* p_;
  size_t left_;
};

}  // namespace kolo
