#include "runtime/store_protocol.h"

#include <algorithm>
#include <cstring>

#include "common/hmac.h"

namespace kolo {

std::string store_hello_mac(const std::string& secret, const std::string& server_nonce, uint64_t job,
                            uint32_t rank, const std::string& client_nonce, uint8_t sealed) {
  MessageWriter w;
  w.str("kolo store hello");
  w.str(server_nonce);
  w.u64(job);
  w.u32(rank);
  w.str(client_nonce);
  w.u8(sealed);
  std::string bytes = w.finish();
  Digest d = hmac_sha256(secret, bytes.data(), bytes.size());
  return std::string(d.begin(), d.end());
}

std::string store_ack_mac(const std::string& secret, const std::string& server_nonce,
                          const std::string& client_nonce) {
  MessageWriter w;
  w.str("kolo store ack");
  w.str(server_nonce);
  w.str(client_nonce);
  std::string bytes = w.finish();
  Digest d = hmac_sha256(secret, bytes.data(), bytes.size());
  return std::string(d.begin(), d.end());
}

Status StoreSeal::create(const std::string& secret, const std::string& server_nonce, const std::string& client_nonce,
                         bool server_side, std::unique_ptr<StoreSeal>* out) {
  SealKey to_server, to_client;
  const std::string salt = server_nonce + client_nonce;
  KOLO_RETURN_IF_ERROR(derive_seal_key(secret, salt, "kolo store: client to server", &to_server));
  KOLO_RETURN_IF_ERROR(derive_seal_key(secret, salt, "kolo store: server to client", &to_client));
  out->reset(server_side ? new StoreSeal(to_client, to_server) : new StoreSeal(to_server, to_client));
  return Status::ok();
}

std::string StoreSeal::seal(const std::string& message) {
  const size_t body = message.size() - 4;
  std::string out(4 + body + kSealTagBytes, '\0');
  const uint32_t length = static_cast<uint32_t>(body + kSealTagBytes);
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  // Sealing fails only where OpenSSL cannot run AES-GCM at all; the garbage
  // left then fails to open at the other end, which ends the connection.
  (void)send_.seal(message.data() + 4, body, out.data(), 4, &out[4], reinterpret_cast<uint8_t*>(&out[4 + body]));
  return out;
}

bool StoreSeal::open(const unsigned char length[4], std::string* body) {
  if (body->size() < kSealTagBytes) return false;
  const size_t n = body->size() - kSealTagBytes;
  if (!recv_.open(body->data(), n, length, 4, reinterpret_cast<const uint8_t*>(body->data() + n), &(*body)[0])) {
    return false;
  }
  body->resize(n);
  return true;
}

void MessageWriter::u32(uint32_t v) {
  for (int i = 0; i < 4; ++i) bytes_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void MessageWriter::u64(uint64_t v) {
  for (int i = 0; i < 8; ++i) bytes_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void MessageWriter::str(const std::string& s) {
  u32(static_cast<uint32_t>(s.size()));
  bytes_ += s;
}

std::string MessageWriter::finish() const {
  MessageWriter framed;
  framed.u32(static_cast<uint32_t>(bytes_.size()));
  return framed.bytes_ + bytes_;
}

bool MessageReader::u8(uint8_t* v) {
  if (left_ < 1) return false;
  *v = static_cast<uint8_t>(*p_);
  ++p_;
  --left_;
  return true;
}

bool MessageReader::u32(uint32_t* v) {
  if (left_ < 4) return false;
  uint32_t x = 0;
  for (int i = 0; i < 4; ++i) x |= static_cast<uint32_t>(static_cast<uint8_t>(p_[i])) << (8 * i);
  *v = x;
  p_ += 4;
  left_ -= 4;
  return true;
}

bool MessageReader::u64(uint64_t* v) {
  if (left_ < 8) return false;
  uint64_t x = 0;
  for (int i = 0; i < 8; ++i) x |= static_cast<uint64_t>(static_cast<uint8_t>(p_[i])) << (8 * i);
  *v = x;
  p_ += 8;
  left_ -= 8;
  return true;
}

bool MessageReader::str(std::string* s) {
  uint32_t n = 0;
  if (!u32(&n) || n > left_) return false;
  s->assign(p_, n);
  p_ += n;
  left_ -= n;
  return true;
}

bool store_macs_equal(const std::string& a, const std::string& b) {
  Digest x{}, y{};
  if (a.size() != x.size() || b.size() != y.size()) return false;
  std::copy(a.begin(), a.end(), x.begin());
  std::copy(b.begin(), b.end(), y.begin());
  return digests_equal(x, y);
}

Status parse_store_request(const std::string& body, StoreRequest* out) {
  MessageReader r(body.data(), body.size());
  uint8_t op = 0;
  if (!r.u8(&op)) return invalid_argument("empty store request");
  StoreRequest q;
  q.op = static_cast<StoreOp>(op);
  bool ok = false;
  switch (q.op) {
    case StoreOp::kHello:
      ok = r.u32(&q.magic) && r.u64(&q.job) && r.u32(&q.rank) && r.u8(&q.sealed) && r.str(&q.nonce) &&
           r.str(&q.mac);
      break;
    case StoreOp::kSet:
    case StoreOp::kSetIfAbsent:
      ok = r.str(&q.key) && r.str(&q.value);
      break;
    case StoreOp::kGet: {
      uint32_t n = 0;
      ok = r.u32(&q.timeout_ms) && r.u32(&n);
      // Each key takes at least its 4-byte length: a count beyond what the
      // body can hold is a lie, refused before anything is reserved.
      if (ok && n > body.size() / 4) ok = false;
      for (uint32_t i = 0; ok && i < n; ++i) {
        q.keys.emplace_back();
        ok = r.str(&q.keys.back());
      }
      break;
    }
    default:
      return invalid_argument("unknown store request " + std::to_string(op));
  }
  if (!ok) return invalid_argument("truncated store request");
  if (!r.done()) return invalid_argument("trailing bytes after a store request");
  *out = std::move(q);
  return Status::ok();
}

}  // namespace kolo
